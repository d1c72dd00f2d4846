package setup

// SetEnabledForTest sets the pull model's enabled gauge, so that a test can start a manager
// from the value an earlier one left and see the new manager set it.
func SetEnabledForTest(v float64) { enabledGauge.Set(v) }
