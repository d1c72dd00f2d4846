package revocation

import (
	"slices"
	"testing"
)

// TestSecondLook: a key is put back only when two looks in a row miss it, so that a revocation
// between its record write and its blocklist write is not "restored" (with a Warning) by the
// keeper; a key that came back in between is forgotten; namespaces do not mix.
func TestSecondLook(t *testing.T) {
	k := &BlocklistKeeper{}
	steps := []struct {
		ns        string
		found     []string
		confirmed []string
		fresh     bool
	}{
		{"p1", []string{"a", "b"}, nil, true},           // first seen: look again
		{"p2", []string{"a"}, nil, true},                // another principal's own memory
		{"p1", []string{"b", "c"}, []string{"b"}, true}, // b missed twice; a came back; c is new
		{"p1", []string{"c"}, []string{"c"}, false},
		{"p1", nil, nil, false},
		{"p2", []string{"a"}, []string{"a"}, false},
	}
	for i, s := range steps {
		confirmed, fresh := k.secondLook(s.ns, s.found)
		if !slices.Equal(confirmed, s.confirmed) || fresh != s.fresh {
			t.Errorf("step %d (%s %v): confirmed %v fresh %v, want %v %v", i, s.ns, s.found, confirmed, fresh, s.confirmed, s.fresh)
		}
	}
}
