package parallel

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEach: every item is handled once, and never more than n at a time.
func TestEach(t *testing.T) {
	items := make([]int, 100)
	for i := range items {
		items[i] = i
	}
	var running, most atomic.Int32
	var mu sync.Mutex
	seen := map[int]int{}
	Each(4, items, func(i int) {
		now := running.Add(1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		mu.Lock()
		seen[i]++
		mu.Unlock()
	})
	if len(seen) != len(items) {
		t.Fatalf("%d of %d items handled", len(seen), len(items))
	}
	for i, n := range seen {
		if n != 1 {
			t.Errorf("item %d handled %d times", i, n)
		}
	}
	if m := most.Load(); m > 4 || m < 1 {
		t.Errorf("%d ran at once, want at most 4", m)
	}
	Each(0, []int{1}, func(int) {}) // n < 1 still runs
}
