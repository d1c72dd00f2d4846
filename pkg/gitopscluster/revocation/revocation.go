package revocation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/selection"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/parallel"
)

// Departures remembers, per GitOpsCluster, the departures it waits on and the wave they belong
// to. A departure is acted on only after the settle period and a live read that still lacks
// the cluster, and the circuit breaker judges the whole wave, not what one pass happens to
// confirm. Losing this memory (a restart) only restarts the wait.
type Departures struct {
	mu    sync.Mutex
	waves map[string]*wave
}

// wave is what the circuit breaker of one GitOpsCluster judges together: the departures
// pending (each with when it was first seen missing) and those revoked since the wave began or
// since the last approval. OCM rewrites its pages one write at a time, so the departures of one
// change ripen a page at a time, each page under the limit. A departure first seen less than a
// settle period after the wave's last revocation joins the wave; the wave ends when an
// approval is used, or when a settle period passes after its last revocation with nothing
// pending.
type wave struct {
	pending     map[string]time.Time
	revoked     sets.Set[string]
	lastRevoked time.Time
}

func waveKey(principalNS string, goc *v1alpha1.GitOpsCluster) string {
	return principalNS + "/" + goc.Namespace + "/" + goc.Name
}

// wave returns key's wave, made when missing; d.mu must be held.
func (d *Departures) wave(key string) *wave {
	if d.waves == nil {
		d.waves = map[string]*wave{}
	}
	w := d.waves[key]
	if w == nil {
		w = &wave{pending: map[string]time.Time{}, revoked: sets.New[string]()}
		d.waves[key] = w
	}
	return w
}

// observe keeps the pending departures that are still candidates and, when start is set,
// starts the clock of the new ones. It ends the wave's revocations once they no longer count,
// and returns the departures that have waited out the settle period and how long until the
// next one has.
func (d *Departures) observe(key string, candidates sets.Set[string], now time.Time, settle time.Duration, start bool) (ripe []string, wait time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waves[key] == nil && (!start || candidates.Len() == 0) {
		return nil, 0
	}
	w := d.wave(key)
	for c := range w.pending {
		if !candidates.Has(c) {
			delete(w.pending, c)
		}
	}
	if start {
		for c := range candidates {
			if _, ok := w.pending[c]; !ok {
				w.pending[c] = now
			}
		}
	}
	earliest := now
	for _, first := range w.pending {
		if first.Before(earliest) {
			earliest = first
		}
	}
	if w.revoked.Len() > 0 && earliest.Sub(w.lastRevoked) >= settle {
		w.revoked = sets.New[string]()
	}
	if len(w.pending) == 0 && w.revoked.Len() == 0 {
		delete(d.waves, key)
		return nil, 0
	}
	for _, c := range sets.List(candidates) {
		first, ok := w.pending[c]
		if !ok {
			continue
		}
		if left := settle - now.Sub(first); left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		ripe = append(ripe, c)
	}
	return ripe, wait
}

// restart forgets when the pending departures of key were first seen: the selection could not
// be read, so none of them is known to have lasted.
func (d *Departures) restart(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.waves[key]; w != nil {
		clear(w.pending)
	}
}

// forget drops departures that turned out not to be departures.
func (d *Departures) forget(key string, clusters ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.waves[key]; w != nil {
		for _, c := range clusters {
			delete(w.pending, c)
		}
	}
}

// size returns how many agents the wave of key takes (the departing clusters and those it
// revoked already) and how many there were before it (records, plus those it revoked).
func (d *Departures) size(key string, departing, records sets.Set[string]) (leaving, fleetBefore int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	revoked := sets.New[string]()
	if w := d.waves[key]; w != nil {
		revoked = w.revoked
	}
	return departing.Union(revoked).Len(), records.Union(revoked).Len()
}

// revoked moves clusters from pending to the wave's revocations.
func (d *Departures) revoked(key string, clusters []string, now time.Time) {
	if len(clusters) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.wave(key)
	for _, c := range clusters {
		delete(w.pending, c)
		w.revoked.Insert(c)
	}
	w.lastRevoked = now
}

// approved ends the wave of key: a person approved it, and what follows is judged anew.
func (d *Departures) approved(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.waves[key]; w != nil {
		w.revoked = sets.New[string]()
	}
}

// drop forgets key's wave (its GitOpsCluster is gone).
func (d *Departures) drop(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.waves, key)
}

// Result is what the revocation phase tells the rest of the reconcile.
type Result struct {
	// Requeue is when pending departures are looked at again (zero: none pending).
	Requeue time.Duration
	// Paused is the message of a pass the circuit breaker holds back ("" when not paused).
	Paused string
	// Pending counts departures not acted on yet.
	Pending int
	// Revoked counts clusters of spec.revokedClusters whose agent is cut off.
	Revoked int
	// BlocklistKeys and BlocklistBytes measure the principal's blocklist (from the cache);
	// BlocklistFull is set when certificates could not be blocked for want of room.
	BlocklistKeys, BlocklistBytes int
	BlocklistFull                 bool
	// AwaitingBlock counts clusters unregistered here whose certificates are still to be
	// blocked: a ledger without a cluster secret, for a cluster this GitOpsCluster does not
	// own. A pass that does not retry their block (each departure waits its settle period
	// again) still reports a full blocklist while they wait.
	AwaitingBlock int
	// Events are what the pass did that a person must hear of (revocations, requests), for
	// the caller to emit on the GitOpsCluster.
	Events []config.Event
}

// Records are the clusters a GitOpsCluster has an agent record for on its principal.
type Records struct {
	// Secrets are its cluster secrets by cluster, each a shallow copy of the cache's object
	// (read only: its maps are the cache's), so that a revocation can let go of each one as it
	// is done with it.
	Secrets map[string]*corev1.Secret
	// Ledgers are the owners recorded on the ledgers it owns (or that no live GitOpsCluster
	// owns), by cluster. Only the owner is kept: at 10,000 clusters the ledger objects
	// themselves would stay in memory through a whole deletion.
	Ledgers map[string]ledger.Owner
	// Revoked are the clusters revoked by an AgentRevocation on any principal the manager
	// serves, or listed in the GitOpsCluster's spec.revokedClusters; Revocations are the first
	// kind only, and RevocationsHere those of the GitOpsCluster's own principal.
	Revoked, Revocations, RevocationsHere sets.Set[string]
}

func (a Records) clusters() sets.Set[string] {
	out := sets.New[string]()
	for c := range a.Secrets {
		out.Insert(c)
	}
	for c := range a.Ledgers {
		out.Insert(c)
	}
	return out
}

// forget drops clusters from the records.
func (a Records) forget(clusters []string) {
	for _, c := range clusters {
		delete(a.Secrets, c)
		delete(a.Ledgers, c)
	}
}

// ReadRecords lists, through the cache, the cluster secrets of goc, the ledgers on its
// principal that goc owns or that have no live owner, and the revocations on the principal.
func (v *Revoker) ReadRecords(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string) (Records, error) {
	rec := Records{Secrets: map[string]*corev1.Secret{}, Ledgers: map[string]ledger.Owner{}}
	var err error
	if rec.Revocations, rec.RevocationsHere, err = v.revocations(ctx, principalNS); err != nil {
		return rec, err
	}
	rec.Revoked = rec.Revocations.Union(sets.New(goc.Spec.RevokedClusters...))
	var secrets corev1.SecretList
	if err := v.Client.List(ctx, &secrets, client.UnsafeDisableDeepCopy, client.InNamespace(principalNS), client.MatchingLabels{
		v1alpha1.LabelOwnerNamespace: goc.Namespace, v1alpha1.LabelOwnerName: goc.Name,
	}); err != nil {
		return rec, err
	}
	for i := range secrets.Items {
		if c := secrets.Items[i].Labels[v1alpha1.LabelAgentName]; c != "" {
			// A shallow copy of its own rather than a pointer into the list, which would keep
			// all of the list in memory as long as any one secret is still referenced.
			s := secrets.Items[i]
			rec.Secrets[c] = &s
		}
	}
	var cms corev1.ConfigMapList
	if err := v.Client.List(ctx, &cms, client.UnsafeDisableDeepCopy, client.InNamespace(principalNS), client.MatchingLabels{ledger.LabelRecord: ledger.RecordLedger}); err != nil {
		return rec, err
	}
	// Most ledgers name one of a few owners: look each owner up once.
	ownerLive := map[types.NamespacedName]bool{}
	for i := range cms.Items {
		cm := &cms.Items[i]
		c := ledger.ClusterOf(cm)
		if c == "" {
			continue
		}
		owner := ledger.OwnerOf(cm)
		if owner.Namespace == goc.Namespace && owner.Name == goc.Name {
			rec.Ledgers[c] = owner
			continue
		}
		// A ledger whose owner is gone (or never named) belongs to every GitOpsCluster of the
		// principal until one of them revokes or adopts it.
		live, seen := ownerLive[owner]
		if !seen {
			var err error
			if live, err = ownership.Live(ctx, v.Client, owner); err != nil {
				return rec, err
			}
			ownerLive[owner] = live
		}
		if !live {
			rec.Ledgers[c] = owner
		}
	}
	return rec, nil
}

// revocations returns the clusters an AgentRevocation revokes: on any principal namespace the
// manager serves (a revocation follows its cluster to every principal), and on principalNS.
// One being deleted is being lifted: it no longer counts, though another may still hold.
func (v *Revoker) revocations(ctx context.Context, principalNS string) (all, here sets.Set[string], _ error) {
	var revs v1alpha1.AgentRevocationList
	if err := v.Client.List(ctx, &revs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, err
	}
	all, here = sets.New[string](), sets.New[string]()
	for i := range revs.Items {
		r := &revs.Items[i]
		if !r.DeletionTimestamp.IsZero() || !v.Config.NamespaceManaged(r.Namespace) {
			continue
		}
		all.Insert(r.Name)
		if r.Namespace == principalNS {
			here.Insert(r.Name)
		}
	}
	return all, here, nil
}

// Revoke cuts off the agents that must go from the principal: clusters a person
// revoked (at once), and clusters that left the selection (once the departure is confirmed,
// and within the circuit breaker's limit). It deletes their cluster secrets and puts every
// certificate their ledger lists on the principal's blocklist. It also lifts revocations a
// person undid. One cluster's failure never stops the others; the errors are returned
// together.
func (v *Revoker) Revoke(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string, obs *selection.Observation, rec Records) (Result, error) {
	var res Result
	now := v.Config.Now()
	store := v.Ledger(principalNS)
	var errs []error

	// 1. A person's revocation: immediate, whatever the Placement says, and lasting: a cluster
	// listed in spec.revokedClusters gets an AgentRevocation on the principal, which only its
	// deletion lifts (Enforcer).
	errs = v.revokeByPerson(ctx, goc, store, principalNS, obs, rec, now, &res)

	// 2. Departures.
	errs = append(errs, v.revokeDepartures(ctx, goc, store, principalNS, obs, rec, now, &res)...)

	// 3. The blocklist's room. Its upkeep (expired entries out, recorded ones back) is the
	// principal's, done once for all its GitOpsClusters (BlocklistKeeper).
	if err := v.blocklistRoom(ctx, principalNS, &res); err != nil {
		errs = append(errs, err)
	}
	for _, err := range errs {
		res.BlocklistFull = res.BlocklistFull || errors.Is(err, ledger.ErrBlocklistFull)
	}
	// Counted only while a full blocklist is being reported, the only time it is read: not a
	// walk over every ledger on every pass of a healthy fleet.
	if room := meta.FindStatusCondition(goc.Status.Conditions, v1alpha1.ConditionBlocklistHasRoom); room != nil && room.Reason == v1alpha1.ReasonBlocklistFull {
		for c := range rec.Ledgers {
			if _, registered := rec.Secrets[c]; !registered && !obs.Owned.Has(c) {
				res.AwaitingBlock++
			}
		}
	}
	return res, errors.Join(errs...)
}

// revokeByPerson revokes the agents of the clusters in spec.revokedClusters that still have a
// cluster secret or a ledger, and asks for their lasting AgentRevocations. It counts in res how
// many revoked clusters the selection holds.
func (v *Revoker) revokeByPerson(ctx context.Context, goc *v1alpha1.GitOpsCluster, store ledger.Store, principalNS string, obs *selection.Observation, rec Records, now time.Time, res *Result) []error {
	var errs []error
	selected := 0
	var byPerson []string
	for _, c := range sets.List(rec.Revoked) {
		if obs.Selected != nil && obs.Selected.Has(c) {
			selected++
		}
		_, hasSecret := rec.Secrets[c]
		_, hasLedger := rec.Ledgers[c]
		if hasSecret || hasLedger {
			byPerson = append(byPerson, c)
		}
	}
	if len(byPerson) > 0 {
		unregistered, blocked, err := v.revokeClusters(ctx, store, rec, byPerson, ledger.CauseRevoked, now, nil)
		if err != nil {
			errs = append(errs, err)
		}
		if len(unregistered) > 0 {
			res.Events = append(res.Events, config.Warning("AgentRevoked", "RevokeAgent",
				"revoked the agents of %s: cluster secrets deleted, %d certificate(s) blocked on the principal in %s", ownership.Summarize(unregistered), blocked, principalNS))
		}
	}
	requested, err := v.requestRevocations(ctx, goc, principalNS, obs, rec)
	res.Events = append(res.Events, requested...)
	if err != nil {
		errs = append(errs, err)
	}
	res.Revoked = selected
	return errs
}

// revokeDepartures revokes the agents of clusters that left the selection: never while the
// selection is unknown, only once each departure is confirmed, and past the circuit breaker
// only with a person's approval, which the wave it approves uses up.
func (v *Revoker) revokeDepartures(ctx context.Context, goc *v1alpha1.GitOpsCluster, store ledger.Store, principalNS string, obs *selection.Observation, rec Records, now time.Time, res *Result) []error {
	candidates := rec.clusters().Difference(obs.Owned).Difference(rec.Revoked)
	key := waveKey(principalNS, goc)
	settle := v.Config.DepartureSettle
	wall := time.Now()
	if obs.Unseen {
		v.Departures.restart(key)
	}
	res.Pending = candidates.Len()
	if obs.TeardownBlocked != "" {
		// Clusters on a page keep being seen; none starts a departure.
		v.Departures.observe(key, candidates, wall, settle, false)
		if candidates.Len() > 0 {
			log.FromContext(ctx).Info("not revoking agents that left the selection while it is unknown", "clusters", candidates.Len(), "why", obs.TeardownBlocked)
		}
		return nil
	}
	ripe, wait := v.Departures.observe(key, candidates, wall, settle, true)
	res.Requeue = wait
	if len(ripe) == 0 {
		return nil
	}
	var errs []error
	confirmed, adopted, err := v.confirmDepartures(ctx, goc, principalNS, key, ripe)
	if err != nil {
		errs = append(errs, err)
	}
	if len(confirmed) < len(ripe) && (res.Requeue == 0 || settle < res.Requeue) {
		res.Requeue = settle
	}
	departing := candidates.Difference(sets.New(adopted...))
	res.Pending = departing.Len()
	if len(confirmed) == 0 {
		return errs
	}
	leaving, agents := v.Departures.size(key, departing, rec.clusters())
	breaker := judgeWave(Wave{Leaving: leaving, Agents: agents, MaxPercent: v.Config.MaxRevocationPercent, Settle: v.Config.DepartureSettle,
		Approval: goc.Annotations[v1alpha1.AnnotationApproveRevocation], GitOpsCluster: types.NamespacedName{Namespace: goc.Namespace, Name: goc.Name}})
	if breaker.Paused != "" {
		res.Paused = breaker.Paused
		return errs
	}
	approved, failed := breaker.Tripped, len(errs)
	unregistered, blocked, err := v.revokeClusters(ctx, store, rec, confirmed, ledger.CauseDeparted, now, nil)
	if err != nil {
		errs = append(errs, err)
	}
	v.Departures.revoked(key, unregistered, time.Now())
	res.Pending -= len(unregistered)
	if len(unregistered) > 0 {
		res.Events = append(res.Events, config.Normal("AgentRevoked", "RevokeAgent",
			"%s left the selection: cluster secrets deleted, %d certificate(s) blocked on the principal in %s", ownership.Summarize(unregistered), blocked, principalNS))
	}
	// An approval covers the wave it approves: once all of it is revoked, it is taken back, so a
	// later mass departure of the same count waits for a person again.
	if approved && len(errs) == failed && res.Pending == 0 {
		if err := v.consumeApproval(ctx, goc); err != nil {
			errs = append(errs, err)
		} else {
			v.Departures.approved(key)
		}
	}
	return errs
}

// blocklistRoom measures the principal's blocklist, from the cache, for BlocklistHasRoom.
func (v *Revoker) blocklistRoom(ctx context.Context, principalNS string, res *Result) error {
	blocklist := &corev1.ConfigMap{}
	if err := v.Client.Get(ctx, types.NamespacedName{Namespace: principalNS, Name: ledger.BlocklistName}, blocklist); client.IgnoreNotFound(err) != nil {
		return err
	}
	res.BlocklistKeys, res.BlocklistBytes = len(blocklist.Data), ledger.BlocklistBytes(blocklist.Data)
	return nil
}

// blocklistNearFullPercent is the share of the blocklist's budget from which it is reported as
// nearly full.
const blocklistNearFullPercent = 80

// BlocklistRoom is the BlocklistHasRoom condition after the revocation pass res, given what
// goc's status said before.
func BlocklistRoom(goc *v1alpha1.GitOpsCluster, principalNS string, res Result) (ok bool, reason, msg string) {
	return blocklistRoom(meta.FindStatusCondition(goc.Status.Conditions, v1alpha1.ConditionBlocklistHasRoom), principalNS, res)
}

// blocklistRoom is BlocklistHasRoom after a revocation pass res, given the condition prev
// said before.
func blocklistRoom(prev *metav1.Condition, principalNS string, res Result) (ok bool, reason, msg string) {
	pct := res.BlocklistBytes * 100 / ledger.BlocklistBudget
	usage := fmt.Sprintf("the blocklist %s/%s holds %d key(s), %d%% of the %d bytes it may use", principalNS, ledger.BlocklistName, res.BlocklistKeys, pct, ledger.BlocklistBudget)
	const advice = "; keys leave as their certificates expire: a shorter clientCertificateValidity keeps fewer of them (see docs/pki.md, Revocation)"
	// Full lasts from the pass that found no room until a retry blocks what waits, or room is
	// made: the passes in between retry nothing and must not report it as merely near full.
	stillFull := prev != nil && prev.Reason == v1alpha1.ReasonBlocklistFull && res.AwaitingBlock > 0 && pct >= blocklistNearFullPercent
	switch {
	case res.BlocklistFull || stillFull:
		return false, v1alpha1.ReasonBlocklistFull, "certificates of departed or revoked clusters could not be blocked for want of room (their cluster secrets are deleted, so argocd-agent no longer registers them); " + usage + advice
	case pct >= blocklistNearFullPercent:
		return false, v1alpha1.ReasonBlocklistNearFull, usage + advice
	}
	return true, v1alpha1.ReasonBlocklistWithinCapacity, usage
}

// Wave is what the circuit breaker judges: a wave of departures of one GitOpsCluster.
type Wave struct {
	// Leaving of Agents are leaving at once (departures less than Settle apart count together).
	Leaving, Agents int
	// MaxPercent is --max-revocation-percent; 0 or 100 and above turn the breaker off.
	MaxPercent int
	Settle     time.Duration
	// Approval is the GitOpsCluster's approval annotation: the count of the wave a person let through.
	Approval      string
	GitOpsCluster types.NamespacedName
}

// Breaker is the circuit breaker's verdict on a Wave.
type Breaker struct {
	// Tripped: the wave is larger than the limit; it goes ahead only with a person's approval.
	Tripped bool
	// Paused is why the wave waits for a person ("" when it goes ahead).
	Paused string
}

// judgeWave is the circuit breaker: a wave within the limit goes ahead; a larger one waits
// until a person approves that very count.
func judgeWave(w Wave) Breaker {
	pct := w.MaxPercent
	tripped := pct > 0 && pct < 100 && w.Agents > 0 && w.Leaving*100 > pct*w.Agents
	if !tripped || w.Approval == strconv.Itoa(w.Leaving) {
		return Breaker{Tripped: tripped}
	}
	return Breaker{Tripped: true, Paused: fmt.Sprintf("%d of %d agent(s) are leaving at once (departures less than %s apart count together, revoked or not), which exceeds the limit of %d%% (manager flag --max-revocation-percent); nothing more is revoked. "+
		"If these clusters really left, approve with: kubectl annotate gitopscluster -n %s %s %s=%d --overwrite",
		w.Leaving, w.Agents, w.Settle, pct, w.GitOpsCluster.Namespace, w.GitOpsCluster.Name, v1alpha1.AnnotationApproveRevocation, w.Leaving)}
}

// consumeApproval removes the approval annotation a pass has used.
func (v *Revoker) consumeApproval(ctx context.Context, goc *v1alpha1.GitOpsCluster) error {
	if _, ok := goc.Annotations[v1alpha1.AnnotationApproveRevocation]; !ok {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationApproveRevocation: nil}}})
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(v.Client.Patch(ctx, goc, client.RawPatch(types.MergePatchType, patch)))
}

// confirmDepartures returns the ripe departures a live read of every decision confirms: still
// not owned on this principal. Those another GitOpsCluster of the principal owns now are
// adopted (returned apart): their agents stay. A live read that cannot see the selection
// confirms nothing, and one that sees no decision at all restarts every departure's wait.
func (v *Revoker) confirmDepartures(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS, key string, ripe []string) (confirmed, adopted []string, _ error) {
	owners, why, unseen, err := v.liveOwners(ctx, goc)
	if err != nil {
		return nil, nil, err
	}
	if unseen {
		v.Departures.restart(key)
	}
	if why != "" {
		log.FromContext(ctx).Info("departures not confirmed: the live selection is unknown", "why", why)
		return nil, nil, nil
	}
	for _, c := range ripe {
		owner := owners[c]
		if owner == nil || names.PrincipalNamespace(owner) != principalNS {
			confirmed = append(confirmed, c)
			continue
		}
		// Another GitOpsCluster of the same principal owns it now: its agent stays, and so do
		// its records, which pass to the new owner.
		v.Departures.forget(key, c)
		adopted = append(adopted, c)
		if err := v.adoptLedger(ctx, principalNS, c, owner); err != nil {
			return confirmed, adopted, err
		}
	}
	return confirmed, adopted, nil
}

// liveOwners reads every PlacementDecision and GitOpsCluster from the API server (not the
// cache) and returns, for every cluster some live GitOpsCluster selects, its owner (the oldest
// such GitOpsCluster). It returns a reason instead when goc's own Placement reads as unknown,
// and unseen when none of its decisions can be read at all.
func (v *Revoker) liveOwners(ctx context.Context, goc *v1alpha1.GitOpsCluster) (_ map[string]*v1alpha1.GitOpsCluster, why string, unseen bool, _ error) {
	reader := v.Reader
	pl := &clusterv1beta1.Placement{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: goc.Spec.PlacementRef.Name}, pl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "the Placement does not exist", true, nil
		}
		return nil, "", false, err
	}
	if !pl.DeletionTimestamp.IsZero() {
		return nil, "the Placement is being deleted", true, nil
	}
	// Live too: a GitOpsCluster created a moment ago that took the cluster over on the same
	// principal must keep its agent connected. They are few; one list.
	var gocs v1alpha1.GitOpsClusterList
	if err := reader.List(ctx, &gocs); err != nil {
		return nil, "", false, err
	}
	byPlacement := map[string][]*v1alpha1.GitOpsCluster{}
	for i := range gocs.Items {
		g := &gocs.Items[i]
		if g.DeletionTimestamp.IsZero() {
			k := ownership.PlacementKey(g.Namespace, g.Spec.PlacementRef.Name)
			byPlacement[k] = append(byPlacement[k], g)
		}
	}
	owners := map[string]*v1alpha1.GitOpsCluster{}
	own := ownership.PlacementKey(goc.Namespace, goc.Spec.PlacementRef.Name)
	ownPages, ownSelected := 0, sets.New[string]()
	var list clusterv1beta1.PlacementDecisionList
	for {
		if err := reader.List(ctx, &list, client.HasLabels{ownership.PlacementLabel}, client.Limit(500), client.Continue(list.Continue)); err != nil {
			return nil, "", false, fmt.Errorf("listing PlacementDecisions: %w", err)
		}
		for i := range list.Items {
			pd := &list.Items[i]
			key := ownership.PlacementKey(pd.Namespace, pd.Labels[ownership.PlacementLabel])
			if key == own {
				ownPages++
				for _, d := range pd.Status.Decisions {
					if d.ClusterName != "" {
						ownSelected.Insert(d.ClusterName)
					}
				}
			}
			for _, g := range byPlacement[key] {
				for _, d := range pd.Status.Decisions {
					if o := owners[d.ClusterName]; o == nil || ownership.Less(g, o) {
						owners[d.ClusterName] = g
					}
				}
			}
		}
		if list.Continue == "" {
			break
		}
	}
	// The same rule as the cached read: pages that disagree with the Placement's own count are
	// mid-rewrite.
	if why := ownership.SelectionUnknown(pl, ownSelected, ownPages); why != "" {
		return nil, why, ownPages == 0, nil
	}
	return owners, "", false, nil
}

// revocationBatchSize is how many clusters revokeClusters unregisters and blocks together: a
// GitOpsCluster of 10,000 clusters is revoked in twenty rounds of a few writes each, so that no
// more than a batch of ledgers is held in memory at once and each batch's certificates are
// blocked soon after its agents are unregistered.
const revocationBatchSize = 500

// revokeClusters unregisters the agents of clusters from the principal and blocks their
// certificates, revocationBatchSize clusters at a time. Each cluster secret's certificate is recorded
// in the cluster's ledger first, then the secret is deleted (argocd-agent v0.10 then closes the
// agent's connection; v0.9.0 only stops mapping the cluster), and only then are the batch's ledgers turned into blocklist entries, in
// a few writes: unregistration never waits for room in the blocklist, and a block that fails
// leaves the ledgers in place for the next pass. It returns the clusters it unregistered and
// how many certificates it blocked.
// done, when set, is called with each batch once it is through.
func (v *Revoker) revokeClusters(ctx context.Context, store ledger.Store, rec Records, clusters []string, cause ledger.Cause, now time.Time, done func(batch []string)) ([]string, int, error) {
	var unregistered, full []string
	blocked := 0
	var errs []error
	for batch := range slices.Chunk(clusters, revocationBatchSize) {
		u, n, f, err := v.revokeBatch(ctx, store, rec, batch, cause, now)
		unregistered, full = append(unregistered, u...), append(full, f...)
		blocked += n
		if err != nil {
			errs = append(errs, err)
		}
		if done != nil {
			done(batch)
		}
	}
	// The clusters a full blocklist turned away are said in one error, not one per batch.
	if len(full) > 0 {
		errs = append(errs, fmt.Errorf("%s: %w", blockFailed, &ledger.BlocklistFullError{Clusters: full}))
	}
	return unregistered, blocked, errors.Join(errs...)
}

const blockFailed = "blocking the certificates of departed or revoked clusters (their cluster secrets are gone; the block is retried)"

// revokeBatch unregisters and blocks one batch; it returns the clusters it unregistered, how
// many certificates it blocked, and the clusters whose certificates found no room.
func (v *Revoker) revokeBatch(ctx context.Context, store ledger.Store, rec Records, clusters []string, cause ledger.Cause, now time.Time) (unregistered []string, blocked int, full []string, _ error) {
	var errs []error
	var mu sync.Mutex
	parallel.Each(v.Config.WriteConcurrency, clusters, func(c string) {
		err := v.unregister(ctx, store, rec, c, now)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		unregistered = append(unregistered, c)
	})
	store.Concurrency = v.Config.WriteConcurrency
	counts, err := store.RevokeClusters(ctx, unregistered, cause, now)
	var fullErr *ledger.BlocklistFullError
	switch {
	case errors.As(err, &fullErr):
		full = fullErr.Clusters
	case err != nil:
		errs = append(errs, fmt.Errorf("%s: %w", blockFailed, err))
	}
	for _, n := range counts {
		blocked += n
	}
	return unregistered, blocked, full, errors.Join(errs...)
}

// unregister records the certificate of cluster's secret in its ledger and deletes the secret.
func (v *Revoker) unregister(ctx context.Context, store ledger.Store, rec Records, cluster string, now time.Time) error {
	s := rec.Secrets[cluster]
	if s == nil {
		return nil
	}
	return retireSecret(ctx, v.Client, store, cluster, ledgerOwnerOf(rec, cluster), s, now)
}

// retireSecret records the certificate of cluster's secret s in store, then deletes s as it was
// read and no other: a secret rewritten or replaced since holds a certificate the ledger has not
// seen, and deleting it would unregister an agent whose certificate nothing blocks. Such a
// secret is left for the next pass, which reads it and records its certificate first.
func retireSecret(ctx context.Context, c client.Client, store ledger.Store, cluster string, owner ledger.Owner, s *corev1.Secret, now time.Time) error {
	if cert, _ := agentsecret.Contents(s); cert.Fingerprint != "" {
		if err := store.Merge(ctx, cluster, owner, ledger.Entries{cert.Fingerprint: cert.NotAfter}, now); err != nil {
			return fmt.Errorf("recording the certificate of cluster %s's secret %s/%s: %w", cluster, s.Namespace, s.Name, err)
		}
	}
	err := c.Delete(ctx, s, client.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("cluster %s's secret %s/%s changed after it was read; it is recorded and deleted on the next pass: %w", cluster, s.Namespace, s.Name, err)
	}
	return fmt.Errorf("deleting cluster %s's secret %s/%s: %w", cluster, s.Namespace, s.Name, err)
}

// ledgerOwnerOf is the owner a ledger written during cluster's revocation carries: the one it
// has, else none (any GitOpsCluster of the principal may then finish the revocation).
func ledgerOwnerOf(rec Records, cluster string) ledger.Owner {
	if owner, ok := rec.Ledgers[cluster]; ok {
		return owner
	}
	if s := rec.Secrets[cluster]; s != nil {
		return ledger.Owner{Namespace: s.Labels[v1alpha1.LabelOwnerNamespace], Name: s.Labels[v1alpha1.LabelOwnerName]}
	}
	return ledger.Owner{}
}

// adoptLedger relabels cluster's ledger with its new owner on the same principal.
func (v *Revoker) adoptLedger(ctx context.Context, principalNS, cluster string, owner *v1alpha1.GitOpsCluster) error {
	cm := &corev1.ConfigMap{}
	if err := v.Client.Get(ctx, types.NamespacedName{Namespace: principalNS, Name: ledger.LedgerName(cluster)}, cm); err != nil {
		return client.IgnoreNotFound(err)
	}
	if cm.Labels[v1alpha1.LabelOwnerNamespace] == owner.Namespace && cm.Labels[v1alpha1.LabelOwnerName] == owner.Name {
		return nil
	}
	patch := client.MergeFromWithOptions(cm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	cm.Labels[v1alpha1.LabelOwnerNamespace] = owner.Namespace
	cm.Labels[v1alpha1.LabelOwnerName] = owner.Name
	return client.IgnoreNotFound(v.Client.Patch(ctx, cm, patch))
}

// deleteRevokedCSRs deletes the requests of cluster that the signer failed as Revoked. OCM's
// registration agent (v1.2.1) keeps waiting on a request its hub approved, Failed or not, and
// asks anew only once that request is gone; kube-controller-manager's cleaner deletes it only
// after an hour.
func (v *Revoker) deleteRevokedCSRs(ctx context.Context, cluster string) error {
	var csrs certificatesv1.CertificateSigningRequestList
	if err := v.Client.List(ctx, &csrs, client.MatchingLabels{names.CSRClusterNameLabel: cluster, names.CSRAddonNameLabel: v.Config.AddonName}); err != nil {
		return err
	}
	for i := range csrs.Items {
		csr := &csrs.Items[i]
		if csr.Spec.SignerName != v.Config.SignerName {
			continue
		}
		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateFailed && c.Reason == names.ReasonCSRRevoked {
				if err := v.Client.Delete(ctx, csr); client.IgnoreNotFound(err) != nil {
					return fmt.Errorf("deleting the revoked certificate request %s of cluster %s: %w", csr.Name, cluster, err)
				}
				break
			}
		}
	}
	return nil
}

// RevokeOwnedAgents revokes, when a GitOpsCluster is deleted, every agent it has records for,
// except those another GitOpsCluster of the same principal owns now. A deletion is always
// honoured: no settle period, no circuit breaker. It returns the Events for the caller to emit.
func (v *Revoker) RevokeOwnedAgents(ctx context.Context, goc *v1alpha1.GitOpsCluster) ([]config.Event, error) {
	principalNS := names.PrincipalNamespace(goc)
	if !v.Config.NamespaceManaged(principalNS) {
		return nil, nil
	}
	if v.Departures != nil {
		v.Departures.drop(waveKey(principalNS, goc))
	}
	rec, err := v.ReadRecords(ctx, goc, principalNS)
	if err != nil {
		return nil, err
	}
	store := v.Ledger(principalNS)
	now := v.Config.Now()
	var leaving []string
	var events []config.Event
	var errs []error
	for _, c := range sets.List(rec.clusters()) {
		selectors, err := ownership.SelectorsOf(ctx, v.Client, c)
		if err != nil {
			return events, err
		}
		if len(selectors) > 0 && names.PrincipalNamespace(selectors[0]) == principalNS &&
			(selectors[0].Namespace != goc.Namespace || selectors[0].Name != goc.Name) {
			if err := v.adoptLedger(ctx, principalNS, c, selectors[0]); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		leaving = append(leaving, c)
	}
	// A deletion reads nothing of a cluster's records once its batch is through: letting go of
	// them there frees the secrets the cache has already dropped while the rest go on.
	unregistered, blocked, err := v.revokeClusters(ctx, store, rec, leaving, ledger.CauseDeparted, now, rec.forget)
	if len(unregistered) > 0 {
		events = append(events, config.Normal("AgentCertificatesRevoked", "RevokeAgents",
			"unregistered %s and blocked %d certificate(s) on the principal in %s", ownership.Summarize(unregistered), blocked, principalNS))
	}
	if err != nil && len(unregistered) == len(leaving) && onlyForWantOfRoom(err) {
		// Every agent is unregistered; only room in the blocklist is missing. The deletion
		// goes on: the ledgers it leaves have no live owner, so the principal's other
		// GitOpsClusters block them as room appears.
		events = append(events, config.Warning(v1alpha1.ReasonBlocklistFull, "RevokeAgents", "%v", err))
		err = nil
	}
	if err != nil {
		errs = append(errs, err)
	}
	return events, errors.Join(errs...)
}

// onlyForWantOfRoom reports whether every error joined in err is the blocklist's want of room:
// a batch that failed otherwise (a ledger read, a record write) must be retried, even when
// another batch found the blocklist full.
func onlyForWantOfRoom(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !onlyForWantOfRoom(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, ledger.ErrBlocklistFull)
}
