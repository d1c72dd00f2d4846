package poll_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

func TestWaiterStopsWhenItsGuardFails(t *testing.T) {
	died := errors.New("the API server exited")
	checks := 0
	err := poll.Waiter{Every: time.Millisecond, Guard: func() error {
		if checks == 3 {
			return died
		}
		return nil
	}}.Wait(context.Background(), time.Minute, func(context.Context) (bool, string) {
		checks++
		return false, "not yet"
	})
	if !errors.Is(err, died) || checks != 3 {
		t.Fatalf("after %d checks: %v; want the guard's error after 3", checks, err)
	}
}

func TestWaitNamesTheLastState(t *testing.T) {
	n := 0
	err := poll.Waiter{Every: time.Millisecond}.Wait(context.Background(), 50*time.Millisecond, poll.State(func() (bool, error) {
		n++
		return false, errors.New("seen " + strings.Repeat("x", n%2+1))
	}))
	if err == nil || !strings.Contains(err.Error(), "last seen: seen x") {
		t.Fatalf("Wait = %v", err)
	}
	if err := poll.Wait(context.Background(), time.Second, poll.State(func() (bool, error) { return true, nil })); err != nil {
		t.Fatalf("a condition that holds: %v", err)
	}
}
