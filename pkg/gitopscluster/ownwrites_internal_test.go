package gitopscluster

import "testing"

func TestOwnStatusWritesTellAStaleRead(t *testing.T) {
	var w ownStatusWrites
	if w.stale("a", "1") {
		t.Fatal("an object never written is stale")
	}
	w.wrote("a", "1", "2")
	if !w.stale("a", "1") {
		t.Fatal("the version the write replaced is not seen as stale")
	}
	if !w.stale("a", "1") {
		t.Fatal("a second stale read is not seen as stale")
	}
	if w.stale("b", "1") {
		t.Fatal("another object is stale")
	}
	// The cache catches up (or another writer moved the object on): not stale, and forgotten.
	if w.stale("a", "2") {
		t.Fatal("the written version is stale")
	}
	if w.stale("a", "1") {
		t.Fatal("the record outlived the cache catching up")
	}
	w.wrote("a", "3", "3") // a write that changed nothing replaced nothing
	if w.stale("a", "3") {
		t.Fatal("a no-op write made its own version stale")
	}
	w.wrote("c", "5", "6")
	w.forget("c")
	if w.stale("c", "5") {
		t.Fatal("a forgotten object is stale")
	}
}
