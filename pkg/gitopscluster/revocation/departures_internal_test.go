package revocation

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// The breaker's wave: departures pending or revoked less than a settle period apart count
// together; the wave ends a quiet settle period after its last revocation, or at an approval;
// a selection that could not be read restarts every pending departure's wait.
func TestDepartureWave(t *testing.T) {
	const settle = 30 * time.Second
	const key = "principal/ns/g"
	var d Departures
	t0 := time.Unix(1_000_000, 0)
	records := sets.New("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")

	// Page one: four leave.
	first := sets.New("a", "b", "c", "d")
	if ripe, wait := d.observe(key, first, t0, settle, true); len(ripe) != 0 || wait != settle {
		t.Fatalf("at once: ripe %v, wait %s", ripe, wait)
	}
	// A second later the next page: two more.
	both := first.Union(sets.New("e", "f"))
	if ripe, _ := d.observe(key, both, t0.Add(time.Second), settle, true); len(ripe) != 0 {
		t.Fatalf("ripe %v before the settle period", ripe)
	}
	ripe, wait := d.observe(key, both, t0.Add(settle), settle, true)
	if len(ripe) != 4 || wait != time.Second {
		t.Fatalf("first page ripe %v, wait %s", ripe, wait)
	}
	if n, of := d.size(key, both, records); n != 6 || of != 10 {
		t.Fatalf("the wave takes %d of %d, want 6 of 10", n, of)
	}
	// Revoked, they still count with the rest of their wave.
	d.revoked(key, ripe, t0.Add(settle))
	rest := sets.New("e", "f")
	if n, of := d.size(key, rest, records.Difference(first)); n != 6 || of != 10 {
		t.Fatalf("after the first page the wave takes %d of %d, want 6 of 10", n, of)
	}

	// Nothing pending for a settle period: the wave is over.
	later := t0.Add(3 * settle)
	d.observe(key, sets.New[string](), later, settle, true)
	if n, of := d.size(key, sets.New("g"), sets.New("g", "h", "i", "j")); n != 1 || of != 4 {
		t.Fatalf("a later departure is judged with %d of %d, want 1 of 4", n, of)
	}
	if len(d.waves) != 0 {
		t.Errorf("an ended wave is kept: %v", d.waves)
	}

	// A departure first seen within the settle period after a revocation joins its wave.
	d.observe(key, sets.New("g"), later, settle, true)
	d.revoked(key, []string{"g"}, later.Add(settle))
	d.observe(key, sets.New("h"), later.Add(settle+time.Second), settle, true)
	if n, _ := d.size(key, sets.New("h"), sets.New("h", "i", "j")); n != 2 {
		t.Fatalf("the wave takes %d, want 2", n)
	}
	// An approval ends it.
	d.approved(key)
	if n, _ := d.size(key, sets.New("h"), sets.New("h", "i", "j")); n != 1 {
		t.Fatalf("after the approval the wave takes %d, want 1", n)
	}

	// The selection could not be read: h's wait starts over when it is seen again.
	d.restart(key)
	at := later.Add(5 * settle)
	if ripe, wait := d.observe(key, sets.New("h"), at, settle, true); len(ripe) != 0 || wait != settle {
		t.Fatalf("after a restart: ripe %v, wait %s", ripe, wait)
	}
	// While the selection is mid-update no departure starts, and a cluster seen again is no
	// departure any more.
	if ripe, _ := d.observe(key, sets.New("i"), at.Add(settle), settle, false); len(ripe) != 0 {
		t.Fatalf("ripe %v while no departure may start", ripe)
	}
	if len(d.waves) != 0 {
		t.Errorf("departures kept after the clusters came back: %v", d.waves)
	}
}
