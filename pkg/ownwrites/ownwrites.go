// Package ownwrites lets a reconciler tell when its cache has not yet seen its own last status
// write. A pass woken by that write's side effects (a Secret it created, say) starts within
// milliseconds of the write; working from the older copy, it sees its own status as out of
// date, and writes it again or is refused by the version precondition.
package ownwrites

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Wait bounds how long Fresh waits for the cache; past it the pass goes on with what it read,
// as any controller would.
const Wait = 2 * time.Second

// Tracker remembers, per object, the version its last status write replaced.
type Tracker struct {
	mu       sync.Mutex
	replaced map[types.UID]string
}

// Wrote records that a write moved the object from version before to version after.
func (t *Tracker) Wrote(uid types.UID, before, after string) {
	if before == "" || before == after {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.replaced == nil {
		t.replaced = map[types.UID]string{}
	}
	t.replaced[uid] = before
}

// Stale reports whether version is the one the object's last write replaced. Any other
// version means the cache has caught up (or moved past), and the record is dropped.
func (t *Tracker) Stale(uid types.UID, version string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	before, ok := t.replaced[uid]
	if !ok {
		return false
	}
	if before == version {
		return true
	}
	delete(t.replaced, uid)
	return false
}

// Forget drops the record of an object that is going away.
func (t *Tracker) Forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.replaced, uid)
}

// Fresh reads obj again through r (the cache) while it is the version the last write replaced,
// every 10 ms for at most Wait, leaving in obj the newest copy read. The status write's own
// event wakes no pass when a controller filters status changes out, so waiting here is what
// lets the pass work from the written status. Errors are r's (NotFound included).
func (t *Tracker) Fresh(ctx context.Context, r client.Reader, obj client.Object) error {
	if !t.Stale(obj.GetUID(), obj.GetResourceVersion()) {
		return nil
	}
	key := client.ObjectKeyFromObject(obj)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, Wait, false, func(ctx context.Context) (bool, error) {
		if err := r.Get(ctx, key, obj); err != nil {
			return false, err
		}
		return !t.Stale(obj.GetUID(), obj.GetResourceVersion()), nil
	})
	if wait.Interrupted(err) {
		return nil
	}
	return err
}
