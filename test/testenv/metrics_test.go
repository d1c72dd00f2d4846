package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// neverQuiet serves API server metrics in which every reading finds one more write.
func neverQuiet(t *testing.T) *rest.Config {
	var writes atomic.Int64
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "apiserver_request_total{resource=\"configmaps\",verb=\"POST\"} %d\n", writes.Add(1))
	}))
	t.Cleanup(metrics.Close)
	return &rest.Config{Host: metrics.URL}
}

// A wait for quiet ends when its context does, not at its limit: a test that gives up (or a
// benchmark that is stopped) must not sit out the rest of a long limit.
func TestAwaitQuietEndsWithItsContext(t *testing.T) {
	cfg := neverQuiet(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, _, err := AwaitQuiet(ctx, cfg, Quiet{For: 5 * time.Minute, Limit: time.Hour, Every: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitQuiet returned %v, want the context's deadline", err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("AwaitQuiet returned %s after its context ended", waited-time.Second)
	}
}

// A wait for quiet gives up at its limit, not up to one reading interval later.
func TestAwaitQuietEndsAtItsLimit(t *testing.T) {
	cfg := neverQuiet(t)
	start := time.Now()
	_, _, err := AwaitQuiet(context.Background(), cfg, Quiet{For: time.Second, Limit: time.Second, Every: time.Minute})
	if err == nil {
		t.Fatal("AwaitQuiet saw a quiet period on a server that never turns quiet")
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("AwaitQuiet returned %s after its limit of 1s", waited-time.Second)
	}
}
