package gitopscluster

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// staleReadRetry is when a pass that read a stale copy runs again if the watch event it waits
// for never comes.
const staleReadRetry = 5 * time.Second

// ownStatusWrites remembers, per GitOpsCluster, the version its last status write replaced.
// A pass that reads that version from the cache runs before the cache has seen the write:
// everything it computes is compared against an outdated status, and its own status write
// would be refused by the version precondition. The write's own watch event wakes the
// object again with the cache caught up, so such a pass can stop at once.
type ownStatusWrites struct {
	mu       sync.Mutex
	replaced map[types.UID]string
}

// wrote records that a status write moved the object from version before to version after.
func (w *ownStatusWrites) wrote(uid types.UID, before, after string) {
	if before == "" || before == after {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.replaced == nil {
		w.replaced = map[types.UID]string{}
	}
	w.replaced[uid] = before
}

// stale reports whether version is the one the object's last status write replaced. Any other
// version means the cache has caught up (or moved past), and the record is dropped.
func (w *ownStatusWrites) stale(uid types.UID, version string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	before, ok := w.replaced[uid]
	if !ok {
		return false
	}
	if before == version {
		return true
	}
	delete(w.replaced, uid)
	return false
}

// forget drops the record of an object that is gone.
func (w *ownStatusWrites) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.replaced, uid)
}
