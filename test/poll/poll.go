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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		ok, state := cond(ctx)
		if ok {
			return nil
		}
		if state != "" {
			last = state
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s; last seen: %s", timeout, last)
		case <-time.After(Interval):
		}
	}
}
