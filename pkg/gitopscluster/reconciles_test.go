package gitopscluster_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// reconciles counts the reconciles controller-runtime starts, by controller and object: it logs
// "Reconciling" at V(5) with the controller's name and the request's namespace and name. A test
// can so tell which watches wake which object, which the reconcile metrics (per controller) cannot.
var reconciles = &reconcileCounter{n: map[reconcileKey]int{}}

type reconcileKey struct{ controller, namespace, name string }

type reconcileCounter struct {
	mu sync.Mutex
	n  map[reconcileKey]int
}

func (c *reconcileCounter) get(controller, namespace, name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[reconcileKey{controller, namespace, name}]
}

func (c *reconcileCounter) record(kv []any) {
	var k reconcileKey
	for i := 0; i+1 < len(kv); i += 2 {
		v, _ := kv[i+1].(string)
		switch kv[i] {
		case "controller":
			k.controller = v
		case "namespace":
			k.namespace = v
		case "name":
			k.name = v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[k]++
}

// countingSink passes everything on to the sink it wraps and counts reconciles on the way.
type countingSink struct {
	logr.LogSink
	values []any
}

func (s countingSink) Enabled(int) bool { return true }

func (s countingSink) Info(level int, msg string, kv ...any) {
	if msg == "Reconciling" {
		reconciles.record(append(slices.Clone(s.values), kv...))
	}
	if s.LogSink.Enabled(level) {
		s.LogSink.Info(level, msg, kv...)
	}
}

func (s countingSink) WithValues(kv ...any) logr.LogSink {
	return countingSink{LogSink: s.LogSink.WithValues(kv...), values: append(slices.Clone(s.values), kv...)}
}

func (s countingSink) WithName(name string) logr.LogSink {
	return countingSink{LogSink: s.LogSink.WithName(name), values: s.values}
}

// waitSettled waits until count, a reconcile count, has not moved for quiet, and fails the
// test when it still moves after a minute.
func waitSettled(t *testing.T, count func() int, quiet time.Duration) {
	t.Helper()
	before := count()
	giveUp := time.Now().Add(time.Minute)
	for since := time.Now(); time.Since(since) < quiet; time.Sleep(100 * time.Millisecond) {
		if n := count(); n != before {
			before, since = n, time.Now()
		}
		if time.Now().After(giveUp) {
			t.Fatalf("still reconciled every few seconds after a minute (%d reconciles)", count())
		}
	}
}
