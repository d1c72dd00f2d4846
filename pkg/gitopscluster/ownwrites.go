package gitopscluster

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// ownWriteWait bounds how long a pass waits for the cache to show this manager's last status
// write; past it the pass goes on with what it read, as any controller would.
const ownWriteWait = 2 * time.Second

// ownStatusWrites remembers, per GitOpsCluster, the version its last status write replaced.
// A pass that reads that version from the cache runs before the cache has seen the write:
// everything it computes is compared against an outdated status, and its own status write
// would be refused by the version precondition. The watch delivers the write within
// milliseconds, so such a pass waits for it (the write's event itself wakes no pass: status
// changes are filtered out).
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

// awaitOwnStatusWrite reads the GitOpsCluster from the cache until it is no longer the version
// this manager's last status write replaced, for at most ownWriteWait, and returns the newest
// copy read.
func (r *Reconciler) awaitOwnStatusWrite(ctx context.Context, key types.NamespacedName, read *v1alpha1.GitOpsCluster) (*v1alpha1.GitOpsCluster, error) {
	latest := read
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, ownWriteWait, false, func(ctx context.Context) (bool, error) {
		goc := &v1alpha1.GitOpsCluster{}
		if err := r.Client.Get(ctx, key, goc); err != nil {
			return false, err
		}
		latest = goc
		return !r.statusWrites.stale(goc.UID, goc.ResourceVersion), nil
	})
	if err != nil && !wait.Interrupted(err) {
		return nil, err
	}
	return latest, nil
}
