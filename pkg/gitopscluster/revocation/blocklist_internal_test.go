package revocation

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
)

// TestSecondLook: a key is put back only once it has been missing from the blocklist for
// blocklistSecondLook, however often the keeper looks in between (a revocation's record
// shards each wake it before its blocklist write), so a revocation on its way is not
// "restored" with a Warning; a key that came back meanwhile is forgotten; namespaces do not mix.
func TestSecondLook(t *testing.T) {
	k := &BlocklistKeeper{}
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		ns        string
		found     []string
		now       time.Time
		confirmed []string
		lookAgain time.Duration
	}{
		{"p1", []string{"a", "b"}, at(0), nil, blocklistSecondLook},                                               // first seen: look again
		{"p1", []string{"a", "b"}, at(50 * time.Millisecond), nil, blocklistSecondLook - 50*time.Millisecond},     // woken at once: too soon
		{"p2", []string{"a"}, at(time.Second), nil, blocklistSecondLook},                                          // another principal's own memory
		{"p1", []string{"b", "c"}, at(blocklistSecondLook), []string{"b"}, blocklistSecondLook},                   // b missing long enough; a came back; c is new
		{"p1", []string{"a", "c"}, at(blocklistSecondLook + time.Second), nil, blocklistSecondLook - time.Second}, // a missing again: counted afresh
		{"p1", []string{"c"}, at(2 * blocklistSecondLook), []string{"c"}, 0},
		{"p1", []string{"c"}, at(2*blocklistSecondLook + time.Millisecond), []string{"c"}, 0}, // not put back yet: at once
		{"p1", nil, at(3 * blocklistSecondLook), nil, 0},
		{"p2", []string{"a"}, at(time.Second + blocklistSecondLook), []string{"a"}, 0},
	}
	for i, s := range steps {
		confirmed, lookAgain := k.secondLook(s.ns, s.found, s.now)
		slices.Sort(confirmed)
		if !slices.Equal(confirmed, s.confirmed) || lookAgain != s.lookAgain {
			t.Errorf("step %d (%s %v): confirmed %v, look again in %s; want %v, %s", i, s.ns, s.found, confirmed, lookAgain, s.confirmed, s.lookAgain)
		}
	}
}

// TestOnlyForWantOfRoom: a deletion goes on past a revocation error only when every part of it
// is the blocklist's want of room; one batch's other failure keeps it for a retry.
func TestOnlyForWantOfRoom(t *testing.T) {
	full := fmt.Errorf("%s: %w", blockFailed, &ledger.BlocklistFullError{Clusters: []string{"a"}})
	other := errors.New("deleting the certificate ledger of cluster b: the server is currently unable to handle the request")
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"room only", full, true},
		{"room, joined", errors.Join(full), true},
		{"room in two batches", errors.Join(errors.Join(), full, full), true},
		{"room and another failure", errors.Join(errors.Join(other), full), false},
		{"another failure only", other, false},
	}
	for _, c := range cases {
		if got := onlyForWantOfRoom(c.err); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
