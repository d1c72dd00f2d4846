package pulltest

import (
	"math"
	"runtime"
)

// LeastAllocated runs f runs times and returns the fewest bytes the process allocated during
// one run. The counter is the process's: a cache's informers and a package's shared manager
// allocate beside f and add to it, never take from it, so the least run is the one nearest to
// what f itself allocates.
func LeastAllocated(runs int, f func()) uint64 {
	least := uint64(math.MaxUint64)
	var before, after runtime.MemStats
	for range runs {
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}
