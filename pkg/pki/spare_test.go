/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// keyMaker counts the keys it starts to make and names each by its number; with a gate, a
// key is finished only when the test sends on it.
type keyMaker struct {
	mu      sync.Mutex
	started int
	gate    chan struct{}
	fail    bool
}

func (m *keyMaker) make() ([]byte, error) {
	m.mu.Lock()
	m.started++
	n, fail := m.started, m.fail
	m.fail = false
	m.mu.Unlock()
	if m.gate != nil {
		<-m.gate
	}
	if fail {
		return nil, errors.New("no entropy")
	}
	return fmt.Appendf(nil, "key-%d", n), nil
}

func (m *keyMaker) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.started
}

// within returns what done yields, failing the test after ten seconds without it.
func within[T any](t *testing.T, what string, done <-chan T) T {
	t.Helper()
	select {
	case v := <-done:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10s", what)
	}
	var zero T
	return zero
}

// waitStarted waits until m has started n keys.
func (m *keyMaker) waitStarted(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for m.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys started, want %d", m.count(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// open lets one key of m be finished, failing the test if no one is making one.
func (m *keyMaker) open(t *testing.T) {
	t.Helper()
	select {
	case m.gate <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("no key was being made")
	}
}

// spareBeingMade is a prepared SpareKey whose spare has started and waits for m.open.
func spareBeingMade(t *testing.T) (*keyMaker, *SpareKey) {
	t.Helper()
	m := &keyMaker{gate: make(chan struct{})}
	s := &SpareKey{New: m.make}
	s.Prepare()
	m.waitStarted(t, 1)
	return m, s
}

// takesTheSpare asserts that a Take started now returns the spare once it is finished, and
// that it makes no key of its own.
func takesTheSpare(t *testing.T, m *keyMaker, s *SpareKey) {
	t.Helper()
	got := make(chan string)
	go func() { k, _ := s.Take(context.Background()); got <- string(k) }()
	m.open(t)
	if k := within(t, "Take", got); k != "key-1" {
		t.Errorf("key %q, want the spare key-1", k)
	}
	if m.count() != 1 {
		t.Errorf("%d keys started, want the spare only", m.count())
	}
}

func TestSpareKey(t *testing.T) {
	ctx := context.Background()
	take := func(t *testing.T, s *SpareKey) string {
		t.Helper()
		k, err := s.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return string(k)
	}

	t.Run("without Prepare each key is made when asked for", func(t *testing.T) {
		m := &keyMaker{}
		s := &SpareKey{New: m.make}
		if got := take(t, s) + " " + take(t, s); got != "key-1 key-2" {
			t.Errorf("keys %q, want key-1 key-2", got)
		}
	})

	t.Run("the spare is made before it is asked for, and handed out once", func(t *testing.T) {
		m := &keyMaker{}
		s := &SpareKey{New: m.make}
		s.Prepare()
		s.Prepare()
		m.waitStarted(t, 1)
		if m.count() != 1 {
			t.Fatalf("%d keys made after Prepare twice, want 1 before any Take", m.count())
		}
		if got := take(t, s); got != "key-1" {
			t.Errorf("first key %q, want the spare key-1", got)
		}
		if got := take(t, s); got != "key-2" {
			t.Errorf("second key %q, want key-2 made when asked for", got)
		}
		if m.count() != 2 {
			t.Errorf("%d keys made, want 2", m.count())
		}
	})

	t.Run("a spare still being made is waited for, not made again", func(t *testing.T) {
		m, s := spareBeingMade(t)
		takesTheSpare(t, m, s)
	})

	t.Run("a caller that stops waiting leaves the spare to the next", func(t *testing.T) {
		m, s := spareBeingMade(t)
		gone, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Take(gone); !errors.Is(err, context.Canceled) {
			t.Fatalf("Take with a cancelled context: %v, want context.Canceled", err)
		}
		takesTheSpare(t, m, s)
	})

	t.Run("a spare that failed is made again when asked for", func(t *testing.T) {
		m := &keyMaker{fail: true}
		s := &SpareKey{New: m.make}
		s.Prepare()
		if k := take(t, s); k != "key-2" {
			t.Errorf("key %q, want key-2 made after the spare failed", k)
		}
	})

	t.Run("a nil SpareKey makes JWT signing keys", func(t *testing.T) {
		var s *SpareKey
		s.Prepare()
		k, err := s.Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateJWTSigningKey(k); err != nil {
			t.Error(err)
		}
	})
}
