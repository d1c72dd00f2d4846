package addonobjects

// ReportMissing is a report whose selected clusters have no probe in the cache, as a pass
// computes it from a cache that has not seen the probes just created.
func ReportMissing(clusters ...string) ForeignReport { return ForeignReport{missingProbes: clusters} }
