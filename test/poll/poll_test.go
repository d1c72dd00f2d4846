package poll_test

import (
	"context"
	"errors"
	"fmt"
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
		return false, fmt.Errorf("check %d", n)
	}))
	if n < 2 || err == nil || !strings.HasSuffix(err.Error(), fmt.Sprintf("last seen: check %d", n)) {
		t.Fatalf("after %d checks: Wait = %v; want the last check's state", n, err)
	}
	if err := poll.Wait(context.Background(), time.Second, poll.State(func() (bool, error) { return true, nil })); err != nil {
		t.Fatalf("a condition that holds: %v", err)
	}
}

func TestWaiterBoundsEachCheck(t *testing.T) {
	hung := 0
	err := poll.Waiter{Every: time.Millisecond, CheckTimeout: 20 * time.Millisecond}.Wait(context.Background(), 5*time.Second, func(ctx context.Context) (bool, string) {
		if hung < 2 {
			hung++
			<-ctx.Done() // a call to a frozen cluster, until its check's time is up
			return false, "hung"
		}
		return true, ""
	})
	if err != nil || hung != 2 {
		t.Fatalf("two hung checks, then one that holds: %v after %d hung", err, hung)
	}
}
