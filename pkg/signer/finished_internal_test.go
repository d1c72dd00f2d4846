package signer

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The memory of finished CSRs forgets entries past finishedTTL, whatever the set's size, and is
// walked at most once per finishedTTL/10.
func TestFinishedSetForgetsOldEntries(t *testing.T) {
	var f finishedSet
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 7 {
		f.add(types.UID(fmt.Sprint("old-", i)), start)
	}
	f.add("recent", start.Add(finishedTTL))
	if !f.has("old-3") {
		t.Fatal("an entry was forgotten before finishedTTL")
	}
	f.add("new", start.Add(finishedTTL+finishedTTL/10))
	if f.has("old-3") {
		t.Error("an entry older than finishedTTL is still held")
	}
	if !f.has("recent") || !f.has("new") {
		t.Error("an entry younger than finishedTTL was forgotten")
	}
	if got := f.len(); got != 2 {
		t.Errorf("set holds %d entries, want 2", got)
	}
}
