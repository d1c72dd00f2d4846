package signer

import (
	"testing"
	"time"
)

// TestRequesterLimits: a requester gets its burst, then one request per interval; another
// requester's budget is its own.
func TestRequesterLimits(t *testing.T) {
	l := requesterLimits{burst: 3, interval: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if w := l.wait("agent-a", now); w != 0 {
			t.Fatalf("request %d of the burst waits %s", i+1, w)
		}
	}
	if w := l.wait("agent-a", now); w <= 0 || w > time.Minute {
		t.Fatalf("the request past the burst waits %s, want up to a minute", w)
	}
	if w := l.wait("agent-b", now); w != 0 {
		t.Fatalf("another requester waits %s", w)
	}
	if w := l.wait("agent-a", now.Add(time.Minute)); w != 0 {
		t.Fatalf("a minute later the request waits %s", w)
	}
	if w := (&requesterLimits{}).wait("agent-a", now); w != 0 {
		t.Fatalf("disabled pacing waits %s", w)
	}
}
