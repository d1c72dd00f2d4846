package bounded

import (
	"strconv"
	"sync"
	"testing"
)

func TestMapHoldsWhatItIsGiven(t *testing.T) {
	m := NewMap[string, int](10)
	if _, ok := m.Load("a"); ok {
		t.Error("an empty map holds a")
	}
	if got := m.LoadOrStore("a", 1); got != 1 {
		t.Errorf("first LoadOrStore of a returned %d, want 1", got)
	}
	if got := m.LoadOrStore("a", 2); got != 1 {
		t.Errorf("second LoadOrStore of a returned %d, want the first value 1", got)
	}
	m.Store("a", 3)
	if got, ok := m.Load("a"); !ok || got != 3 {
		t.Errorf("a after Store is %d (%v), want 3", got, ok)
	}
	if got, ok := m.LoadAndDelete("a"); !ok || got != 3 {
		t.Errorf("LoadAndDelete of a returned %d (%v), want 3", got, ok)
	}
	if _, ok := m.Load("a"); ok || m.Len() != 0 {
		t.Errorf("a is still held after LoadAndDelete (%d entries)", m.Len())
	}
}

func TestMapIsBounded(t *testing.T) {
	const limit = 100
	m := NewMap[string, int](limit)
	for i := range 10 * limit {
		m.LoadOrStore(strconv.Itoa(i), i)
		if n := m.Len(); n > limit {
			t.Fatalf("%d entries held after %d stored, the limit is %d", n, i+1, limit)
		}
	}
	// Replacing a held entry of a full map keeps the others.
	full := NewMap[int, int](2)
	full.Store(1, 1)
	full.Store(2, 2)
	full.Store(2, 3)
	if _, ok := full.Load(1); !ok || full.Len() != 2 {
		t.Errorf("replacing an entry of a full map dropped the others (%d held)", full.Len())
	}
}

func TestMapConcurrentUse(t *testing.T) {
	m := NewMap[int, int](64)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := (g*1000 + i) % 100
				if got := m.LoadOrStore(k, k); got != k {
					t.Errorf("LoadOrStore(%d) returned %d", k, got)
					return
				}
				m.LoadAndDelete(k + 1)
			}
		})
	}
	wg.Wait()
}

// BenchmarkMapLoadOrStore is the cost of one lookup of a held entry, from one goroutine and
// from as many as GOMAXPROCS at once (the informers' transforms run side by side).
func BenchmarkMapLoadOrStore(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "cluster-" + strconv.Itoa(i)
	}
	m := NewMap[string, string](1 << 16)
	for _, k := range keys {
		m.LoadOrStore(k, k)
	}
	b.Run("one goroutine", func(b *testing.B) {
		i := 0
		for b.Loop() {
			m.LoadOrStore(keys[i%len(keys)], "")
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				m.LoadOrStore(keys[i%len(keys)], "")
				i++
			}
		})
	})
}
