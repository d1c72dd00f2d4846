// Package parallel runs independent API calls a few at a time, so that a pass over thousands
// of clusters keeps close to the API server's pace instead of one round trip after another.
package parallel

import "sync"

// Each runs fn for every item, at most n at a time (one when n < 1), and returns when all are
// done.
func Each[T any](n int, items []T, fn func(T)) {
	work := make(chan T)
	var wg sync.WaitGroup
	for range max(1, min(n, len(items))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				fn(it)
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
}
