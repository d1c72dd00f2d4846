package addonobjects

import (
	"sync"
	"time"
)

// probeInFlightFor bounds how long a created probe the cache does not show is taken as on its
// way: past it (the probe deleted before the cache saw it, say) the probe is created again.
const probeInFlightFor = 30 * time.Second

// ProbesInFlight remembers the probes this manager created that its cache may not show yet. A
// pass woken before the cache has caught up (by a side effect of the pass before it, or by
// another probe's answer) would otherwise find them missing and create them again, in vain.
// Its zero value is ready to use.
type ProbesInFlight struct {
	mu sync.Mutex
	// created holds, per probe name (one per GitOpsCluster), the clusters whose probe was
	// created and when.
	created map[string]map[string]time.Time
}

// holdBack returns the clusters of missing whose probe named name is not in flight, and
// whether any was held back. A probe of name whose cluster is not in missing is shown by the
// cache (or its cluster is no longer selected, or the selection is not known), and is
// forgotten, as is one in flight for longer than probeInFlightFor.
func (p *ProbesInFlight) holdBack(name string, missing []string, now time.Time) (toCreate []string, heldBack bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	inFlight := p.created[name]
	if len(inFlight) == 0 {
		// The common case, a fleet whose probes the cache shows: no set of the missing built.
		return missing, false
	}
	stillMissing := make(map[string]bool, len(missing))
	for _, c := range missing {
		stillMissing[c] = true
	}
	for c, at := range inFlight {
		if !stillMissing[c] || now.Sub(at) > probeInFlightFor {
			delete(inFlight, c)
		}
	}
	if len(inFlight) == 0 {
		delete(p.created, name)
		return missing, false
	}
	toCreate = make([]string, 0, len(missing))
	for _, c := range missing {
		if _, ok := inFlight[c]; ok {
			heldBack = true
			continue
		}
		toCreate = append(toCreate, c)
	}
	return toCreate, heldBack
}

// add records that the probe named name exists in cluster's namespace as of now.
func (p *ProbesInFlight) add(name, cluster string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.created == nil {
		p.created = map[string]map[string]time.Time{}
	}
	if p.created[name] == nil {
		p.created[name] = map[string]time.Time{}
	}
	p.created[name][cluster] = now
}

// Seen drops the probe named name of cluster: the cache has shown it, or shown it go (a
// probe deleted is then created again by the pass its deletion wakes).
func (p *ProbesInFlight) Seen(name, cluster string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.created[name], cluster)
	if len(p.created[name]) == 0 {
		delete(p.created, name)
	}
}

// Forget drops the probes named name, their GitOpsCluster gone, and returns their clusters.
func (p *ProbesInFlight) Forget(name string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	clusters := make([]string, 0, len(p.created[name]))
	for c := range p.created[name] {
		clusters = append(clusters, c)
	}
	delete(p.created, name)
	return clusters
}
