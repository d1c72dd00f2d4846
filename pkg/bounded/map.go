// Package bounded holds the process-wide memo tables of the manager: tables that save work or
// memory for what passes through them and must not grow with it. Past its limit a table
// starts over, which costs only what it saved.
package bounded

import "sync"

// Map is a map safe for concurrent use that holds at most limit entries.
type Map[K comparable, V any] struct {
	limit   int
	mu      sync.Mutex
	entries map[K]V
}

// NewMap returns an empty Map that holds at most limit entries (at least one).
func NewMap[K comparable, V any](limit int) *Map[K, V] {
	return &Map[K, V]{limit: max(1, limit)}
}

// Load returns the value held for k.
func (m *Map[K, V]) Load(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.entries[k]
	return v, ok
}

// LoadOrStore returns the value held for k; when there is none it holds v and returns it.
func (m *Map[K, V]) LoadOrStore(k K, v V) V {
	m.mu.Lock()
	defer m.mu.Unlock()
	if held, ok := m.entries[k]; ok {
		return held
	}
	m.storeLocked(k, v)
	return v
}

// Store holds v for k.
func (m *Map[K, V]) Store(k K, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.storeLocked(k, v)
}

// LoadAndDelete returns the value held for k and forgets it.
func (m *Map[K, V]) LoadAndDelete(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.entries[k]
	delete(m.entries, k)
	return v, ok
}

// Len is the number of entries held.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

func (m *Map[K, V]) storeLocked(k K, v V) {
	if _, ok := m.entries[k]; !ok && len(m.entries) >= m.limit {
		m.entries = nil
	}
	if m.entries == nil {
		m.entries = make(map[K]V, min(m.limit, 1024))
	}
	m.entries[k] = v
}
