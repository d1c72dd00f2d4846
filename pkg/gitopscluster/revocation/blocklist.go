package revocation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/recorder"
)

// BlocklistKeeper keeps each principal's blocklist in step with its revocation record, once per
// principal whichever GitOpsClusters use it: an entry whose certificate expired leaves both,
// and a recorded one the blocklist lacks (removed by hand, or lost between the record's write
// and the blocklist's) is put back as soon as the blocklist changes, not at some GitOpsCluster's
// next pass. It also reports the blocklist's keys that argocd-agent can never match.
//
// People may edit the same ConfigMap with argocd-agentctl, which rewrites its whole data from a
// read that may predate a write of the manager: the manager's own writes change only the keys
// they are for and are conditional on the version they read, so a person's key is never
// dropped; a recorded key a person's write drops is put back.
type BlocklistKeeper struct {
	config.Hub

	mu sync.Mutex
	// missing remembers, per principal namespace, when each recorded key the last look found
	// off the blocklist was first seen missing. A revocation writes the record (shard by
	// shard, each write waking the keeper) before the blocklist, so a key never seen listed is
	// put back only when it has been missing for blocklistSecondLook, not when two looks in a
	// row miss it.
	missing map[string]map[string]time.Time
	// listed holds, per principal namespace, the recorded keys some version of the blocklist
	// was seen to hold. Such a key is not on its way: if it is missing, someone removed it,
	// and it is put back at once.
	listed map[string]sets.Set[string]
	// malformed holds, per principal namespace, the keys already reported as unmatchable.
	malformed map[string]sets.Set[string]
}

// blocklistSecondLook is how long a recorded key must be seen missing from the blocklist
// before it is put back: far longer than a revocation takes between its two writes.
const blocklistSecondLook = 3 * time.Second

// secondLookOverride, in nanoseconds, replaces blocklistSecondLook when positive
// (SetBlocklistSecondLookForTest). Atomic: the keeper reads it on its own goroutines.
var secondLookOverride atomic.Int64

// SetBlocklistSecondLookForTest makes every keeper wait d, instead of 3 s, before it puts back a
// recorded key no version of the blocklist was seen to hold, until restore is called. A test
// that sets d far beyond its own timeouts knows that a key back within them came back by the
// other path, at once, however slow the machine.
func SetBlocklistSecondLookForTest(d time.Duration) (restore func()) {
	before := secondLookOverride.Swap(int64(d))
	return func() { secondLookOverride.Store(before) }
}

func secondLookDelay() time.Duration {
	if d := secondLookOverride.Load(); d > 0 {
		return time.Duration(d)
	}
	return blocklistSecondLook
}

// blocklistFullRetry is how soon a blocklist with no room for a recorded key is tried again.
const blocklistFullRetry = time.Minute

// blocklistRecheck bounds the wait for the next expiry, so a clock jump is caught up with.
const blocklistRecheck = time.Hour

// SetupWithManager registers the controller: one request per principal namespace, woken by its
// blocklist and its revocation record.
func (k *BlocklistKeeper) SetupWithManager(mgr ctrl.Manager) error {
	if k.Recorder == nil {
		k.Recorder = recorder.For(mgr, names.EventReporter)
	}
	ofPrincipal := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		// Every version the informer delivers is seen here, in order, even those a coalesced
		// reconcile never reads: a key the manager wrote and a person's next write dropped
		// counts as listed.
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == ledger.BlocklistName {
			k.sawListed(cm.Namespace, cm.Data)
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ledger.BlocklistName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("blocklist").
		Watches(&corev1.ConfigMap{}, ofPrincipal, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return k.Config.NamespaceManaged(o.GetNamespace()) &&
				(o.GetName() == ledger.BlocklistName || o.GetLabels()[ledger.LabelRecord] == ledger.RecordRevoked)
		}))).
		Complete(k)
}

// Reconcile prunes the expired revocations of one principal namespace and puts back on its
// blocklist every recorded one it lacks; it comes back at the next expiry.
func (k *BlocklistKeeper) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := req.Namespace
	if !k.Config.NamespaceManaged(ns) {
		return ctrl.Result{}, nil
	}
	now := k.Config.Now()
	store := LedgerStore(k.Hub, ns)
	var shards corev1.ConfigMapList
	if err := k.Client.List(ctx, &shards, client.UnsafeDisableDeepCopy, client.InNamespace(ns),
		client.MatchingLabels{ledger.LabelRecord: ledger.RecordRevoked}); err != nil {
		return ctrl.Result{}, err
	}
	// A failed prune is returned at the end, so that it is retried with backoff; the
	// blocklist is still kept first.
	pruneErr := pruneRevoked(ctx, store, shards.Items, now)
	if pruneErr != nil {
		pruneErr = fmt.Errorf("pruning expired entries of the blocklist %s/%s: %w", ns, ledger.BlocklistName, pruneErr)
	}
	// The cache's own copy, read only: a full blocklist is some 17,000 keys, and the keeper
	// is woken by every record write of a large revocation.
	blocklist := &corev1.ConfigMap{}
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ledger.BlocklistName}, blocklist, client.UnsafeDisableDeepCopy); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	k.reportMalformed(ns, blocklist)
	k.keepListed(ns, shards.Items)
	// Elapsed time, not the configured clock: the wait is a real one (RequeueAfter).
	missing, lookAgain := k.secondLook(ns, missingFromBlocklist(shards.Items, blocklist.Data, now), time.Now())
	if len(missing) > 0 {
		n, err := store.Reassert(ctx, missing)
		if errors.Is(err, ledger.ErrBlocklistFull) {
			// The GitOpsClusters of the principal report it (BlocklistHasRoom); room comes
			// as certificates expire.
			log.FromContext(ctx).Error(err, "no room to put recorded revocations back on the blocklist", "namespace", ns, "missing", len(missing))
			return ctrl.Result{RequeueAfter: blocklistFullRetry}, nil
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("putting %d recorded revocation(s) back on the blocklist %s/%s: %w", len(missing), ns, ledger.BlocklistName, err)
		}
		if n > 0 {
			restored := &corev1.ConfigMap{}
			if err := k.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: ledger.BlocklistName}, restored); err == nil && k.Recorder != nil {
				k.Recorder.Eventf(restored, nil, corev1.EventTypeWarning, "BlocklistRestored", "RevokeAgents",
					"%d revoked certificate(s) were missing from %s/%s and were blocked again", n, ns, ledger.BlocklistName)
			}
		}
	}
	if pruneErr != nil {
		return ctrl.Result{}, pruneErr
	}
	if lookAgain > 0 {
		return ctrl.Result{RequeueAfter: lookAgain}, nil
	}
	return ctrl.Result{RequeueAfter: untilNextExpiry(shards.Items, now)}, nil
}

// secondLook returns the keys of found (recorded, off the blocklist) to put back: those seen
// listed before, and those missing for blocklistSecondLook at now; and when to look again for
// the others (0 if there are none). A key not found any more is forgotten.
func (k *BlocklistKeeper) secondLook(ns string, found []string, now time.Time) (confirmed []string, lookAgain time.Duration) {
	delay := secondLookDelay()
	k.mu.Lock()
	defer k.mu.Unlock()
	before := k.missing[ns]
	seen := make(map[string]time.Time, len(found))
	for _, fp := range found {
		since, ok := before[fp]
		if !ok {
			since = now
		}
		seen[fp] = since
		if k.listed[ns].Has(fp) {
			confirmed = append(confirmed, fp)
		} else if wait := delay - now.Sub(since); wait <= 0 {
			confirmed = append(confirmed, fp)
		} else if lookAgain == 0 || wait < lookAgain {
			lookAgain = wait
		}
	}
	if k.missing == nil {
		k.missing = map[string]map[string]time.Time{}
	}
	// A confirmed key stays remembered: if putting it back fails, the next look puts it back
	// at once; once back, it is not found and so forgotten.
	k.missing[ns] = seen
	return confirmed, lookAgain
}

// sawListed remembers the keys of a version of ns's blocklist as listed. Keys of no record (a
// person's) are dropped again at the keeper's next look.
func (k *BlocklistKeeper) sawListed(ns string, data map[string]string) {
	if len(data) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.listed == nil {
		k.listed = map[string]sets.Set[string]{}
	}
	l := k.listed[ns]
	if l == nil {
		l = sets.New[string]()
		k.listed[ns] = l
	}
	for fp := range data {
		l.Insert(fp)
	}
}

// keepListed forgets the listed keys of ns that no revocation record holds: a person's keys,
// and the manager's once expired and pruned. The memory stays as large as the record.
func (k *BlocklistKeeper) keepListed(ns string, shards []corev1.ConfigMap) {
	byName := make(map[string]map[string]string, len(shards))
	for i := range shards {
		byName[shards[i].Name] = shards[i].Data
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for fp := range k.listed[ns] {
		if _, recorded := byName[ledger.ShardName(fp)][fp]; !recorded {
			k.listed[ns].Delete(fp)
		}
	}
}

// reportMalformed records a Warning on the blocklist when it holds keys argocd-agent can never
// match, once per key while it stays: the principal looks a client certificate's fingerprint
// up as 64 upper-case hex characters, exactly, and argocd-agentctl stores what it is given.
func (k *BlocklistKeeper) reportMalformed(ns string, blocklist *corev1.ConfigMap) {
	bad := malformedKeys(blocklist.Data)
	k.mu.Lock()
	fresh := bad.Difference(k.malformed[ns])
	if k.malformed == nil {
		k.malformed = map[string]sets.Set[string]{}
	}
	// Forgetting the keys that went makes one added again reported again.
	k.malformed[ns] = bad
	k.mu.Unlock()
	if fresh.Len() == 0 || k.Recorder == nil {
		return
	}
	k.Recorder.Eventf(blocklist, nil, corev1.EventTypeWarning, "BlocklistKeyMalformed", "CheckBlocklist",
		"%d key(s) of %s/%s are not certificate fingerprints as argocd-agent compares them (the SHA-256 of the certificate's DER as 64 upper-case hex characters, no separators), so they block nothing: %s",
		fresh.Len(), ns, ledger.BlocklistName, describeMalformed(sets.List(fresh)))
}

// malformedKeys are the keys of a blocklist's data that are no fingerprint.
func malformedKeys(data map[string]string) sets.Set[string] {
	bad := sets.New[string]()
	for key := range data {
		if !ledger.ValidFingerprint(key) {
			bad.Insert(key)
		}
	}
	return bad
}

// describeMalformed names at most three keys, each with the key that would block its
// certificate when there is one.
func describeMalformed(keys []string) string {
	var parts []string
	for _, key := range keys[:min(len(keys), 3)] {
		if up := strings.ToUpper(key); ledger.ValidFingerprint(up) {
			parts = append(parts, fmt.Sprintf("%q (write %s)", key, up))
		} else {
			parts = append(parts, strconv.Quote(key))
		}
	}
	if len(keys) > 3 {
		parts = append(parts, fmt.Sprintf("and %d more", len(keys)-3))
	}
	return strings.Join(parts, ", ")
}

// untilNextExpiry is the wait until the first recorded certificate expires, at most
// blocklistRecheck and at least a second.
func untilNextExpiry(shards []corev1.ConfigMap, now time.Time) time.Duration {
	wait := blocklistRecheck
	for i := range shards {
		for _, v := range shards[i].Data {
			if t, ok := ledger.RevokedNotAfter(v); ok && t.Sub(now) < wait {
				wait = t.Sub(now)
			}
		}
	}
	return max(wait, time.Second)
}

// pruneRevoked drops expired revocations; it reads past the cache only when the cached shards
// show one.
func pruneRevoked(ctx context.Context, store ledger.Store, shards []corev1.ConfigMap, now time.Time) error {
	for i := range shards {
		for _, v := range shards[i].Data {
			if ledger.RevokedExpired(v, now) {
				return store.Prune(ctx, now)
			}
		}
	}
	return nil
}

// missingFromBlocklist lists the fingerprints of the revocation record, unexpired or
// unreadable, that the blocklist lacks.
func missingFromBlocklist(shards []corev1.ConfigMap, blocklist map[string]string, now time.Time) []string {
	var out []string
	for i := range shards {
		for fp, v := range shards[i].Data {
			if _, ok := blocklist[fp]; !ok && ledger.ValidFingerprint(fp) && !ledger.RevokedExpired(v, now) {
				out = append(out, fp)
			}
		}
	}
	return out
}
