package ownwrites

import "testing"

func TestOwnStatusWritesTellAStaleRead(t *testing.T) {
	var w Tracker
	if w.Stale("a", "1") {
		t.Fatal("an object never written is stale")
	}
	w.Wrote("a", "1", "2")
	if !w.Stale("a", "1") {
		t.Fatal("the version the write replaced is not seen as stale")
	}
	if !w.Stale("a", "1") {
		t.Fatal("a second stale read is not seen as stale")
	}
	if w.Stale("b", "1") {
		t.Fatal("another object is stale")
	}
	// The cache catches up (or another writer moved the object on): not stale, and forgotten.
	if w.Stale("a", "2") {
		t.Fatal("the written version is stale")
	}
	if w.Stale("a", "1") {
		t.Fatal("the record outlived the cache catching up")
	}
	w.Wrote("a", "3", "3") // a write that changed nothing replaced nothing
	if w.Stale("a", "3") {
		t.Fatal("a no-op write made its own version stale")
	}
	w.Wrote("c", "5", "6")
	w.Forget("c")
	if w.Stale("c", "5") {
		t.Fatal("a forgotten object is stale")
	}
}
