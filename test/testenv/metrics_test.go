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

// A wait for quiet ends when its context does, not at its limit: a test that gives up (or a
// benchmark that is stopped) must not sit out the rest of a long limit.
func TestAwaitQuietEndsWithItsContext(t *testing.T) {
	var writes atomic.Int64
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Every reading finds one more write, so the server never turns quiet.
		fmt.Fprintf(w, "apiserver_request_total{resource=\"configmaps\",verb=\"POST\"} %d\n", writes.Add(1))
	}))
	defer metrics.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, _, err := AwaitQuiet(ctx, &rest.Config{Host: metrics.URL}, Quiet{For: 5 * time.Minute, Limit: time.Hour, Every: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitQuiet returned %v, want the context's deadline", err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("AwaitQuiet returned %s after its context ended", waited-time.Second)
	}
}
