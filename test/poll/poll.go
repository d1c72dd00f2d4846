// Package poll is the tests' one way to wait for a condition: poll it until it holds, and
// fail with what was last seen when it does not within the time given.
package poll

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Interval is how often a condition is checked.
const Interval = 100 * time.Millisecond

// Until checks check every Interval until it returns nil, and fails t with its last error
// when timeout passes first.
func Until(t testing.TB, what string, timeout time.Duration, check func() error) {
	t.Helper()
	UntilState(t, what, timeout, func(context.Context) (bool, string) {
		if err := check(); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// UntilState checks cond every Interval until it holds, and fails t with the state cond last
// described when timeout passes first. Each check gets a context that ends with the wait.
func UntilState(t testing.TB, what string, timeout time.Duration, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	if err := Wait(context.Background(), timeout, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Wait checks cond every Interval until it holds, ctx ends, or timeout passes; the error names
// the state cond last described.
func Wait(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) (bool, string)) error {
	return Waiter{}.Wait(ctx, timeout, cond)
}

// Waiter is a wait with what Wait leaves at its defaults.
type Waiter struct {
	// Every is how often the condition is checked; Interval when zero. A wait on many
	// objects of a busy fleet checks less often, to leave its API servers the CPU.
	Every time.Duration
	// Guard, when set, is checked before each check of the condition: its error ends the
	// wait at once (a process the condition depends on has died).
	Guard func() error
	// CheckTimeout, when set, bounds each check of the condition, so that one call that hangs
	// (to a frozen cluster) is retried instead of taking the whole wait.
	CheckTimeout time.Duration
}

// Wait is the package's Wait, checking as w says.
func (w Waiter) Wait(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) (bool, string)) error {
	every := w.Every
	if every == 0 {
		every = Interval
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		if w.Guard != nil {
			if err := w.Guard(); err != nil {
				return fmt.Errorf("stopped waiting: %w", err)
			}
		}
		ok, state := w.check(ctx, cond)
		if ok {
			return nil
		}
		if state != "" {
			last = state
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s; last seen: %s", timeout, last)
		case <-time.After(every):
		}
	}
}

// check runs cond once, within CheckTimeout when it is set.
func (w Waiter) check(ctx context.Context, cond func(ctx context.Context) (bool, string)) (bool, string) {
	if w.CheckTimeout == 0 {
		return cond(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, w.CheckTimeout)
	defer cancel()
	return cond(ctx)
}

// State turns a condition that returns an error into one Wait takes: the error, when there is
// one, is the state last seen.
func State(cond func() (bool, error)) func(context.Context) (bool, string) {
	return func(context.Context) (bool, string) {
		ok, err := cond()
		if err != nil {
			return ok, err.Error()
		}
		return ok, ""
	}
}

// Consistently checks check every Interval for d, and fails t at the first error.
func Consistently(t testing.TB, what string, d time.Duration, check func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(Interval) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}
