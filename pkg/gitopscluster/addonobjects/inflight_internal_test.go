package addonobjects

import (
	"slices"
	"testing"
	"time"
)

// TestProbeInFlightLapses: a probe the cache never shows (deleted before the cache saw it) is
// held back for probeInFlightFor only, then created again; one the cache shows is forgotten.
func TestProbeInFlightLapses(t *testing.T) {
	var p ProbesInFlight
	t0 := time.Now()
	p.add("probe", "c1", t0)
	p.add("probe", "c2", t0)
	if got, held := p.holdBack("probe", []string{"c1", "c2", "c3"}, t0.Add(time.Second)); !slices.Equal(got, []string{"c3"}) || !held {
		t.Fatalf("within the bound: create %v (held back %v), want [c3] and true", got, held)
	}
	// c2 is shown by the cache now: forgotten, and created at once if it goes missing again.
	if got, held := p.holdBack("probe", []string{"c1"}, t0.Add(2*time.Second)); len(got) != 0 || !held {
		t.Fatalf("c2 shown: create %v (held back %v), want none and true", got, held)
	}
	if got, _ := p.holdBack("probe", []string{"c1", "c2"}, t0.Add(3*time.Second)); !slices.Equal(got, []string{"c2"}) {
		t.Fatalf("c2 gone again: create %v, want [c2]", got)
	}
	if got, held := p.holdBack("probe", []string{"c1"}, t0.Add(probeInFlightFor+time.Second)); !slices.Equal(got, []string{"c1"}) || held {
		t.Fatalf("past the bound: create %v (held back %v), want [c1] and false", got, held)
	}
	if got, _ := p.holdBack("other", []string{"c1"}, t0); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("another GitOpsCluster's probe: create %v, want [c1]", got)
	}
}

// TestProbeInFlightSeenAndForgotten: a probe the cache showed, or showed go, is created again
// at once when missing; a GitOpsCluster's record is handed back when it goes.
func TestProbeInFlightSeenAndForgotten(t *testing.T) {
	var p ProbesInFlight
	t0 := time.Now()
	p.add("probe", "c1", t0)
	p.add("probe", "c2", t0)
	p.Seen("probe", "c1")
	if got, held := p.holdBack("probe", []string{"c1", "c2"}, t0); !slices.Equal(got, []string{"c1"}) || !held {
		t.Fatalf("c1 seen: create %v (held back %v), want [c1] and true", got, held)
	}
	if got := p.Forget("probe"); !slices.Equal(got, []string{"c2"}) {
		t.Fatalf("forgotten: %v, want [c2]", got)
	}
	if got, held := p.holdBack("probe", []string{"c2"}, t0); !slices.Equal(got, []string{"c2"}) || held {
		t.Fatalf("after Forget: create %v (held back %v), want [c2] and false", got, held)
	}
}
