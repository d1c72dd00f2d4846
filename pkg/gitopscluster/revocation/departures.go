package revocation

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/selection"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
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

// departureRevoker revokes the agents of clusters that left a GitOpsCluster's selection: it confirms
// each departure with a live read, lets the circuit breaker judge the wave, and hands what
// goes ahead to the unregistrar.
type departureRevoker struct {
	config.Hub
	// memory is the departures waited on, kept across passes.
	memory *Departures
}

// revoke revokes the agents of clusters that left the selection: never while the
// selection is unknown, only once each departure is confirmed, and past the circuit breaker
// only with a person's approval, which the wave it approves uses up.
func (dr departureRevoker) revoke(ctx context.Context, goc *v1alpha1.GitOpsCluster, store ledger.Store, principalNS string, obs *selection.Observation, rec Records, now time.Time, res *Result) []error {
	candidates := rec.clusters().Difference(obs.Owned).Difference(rec.Revoked)
	key := waveKey(principalNS, goc)
	settle := dr.Config.DepartureSettle
	wall := time.Now()
	if obs.Unseen {
		dr.memory.restart(key)
	}
	res.Pending = candidates.Len()
	if obs.TeardownBlocked != "" {
		// Clusters on a page keep being seen; none starts a departure.
		dr.memory.observe(key, candidates, wall, settle, false)
		if candidates.Len() > 0 {
			log.FromContext(ctx).Info("not revoking agents that left the selection while it is unknown", "clusters", candidates.Len(), "why", obs.TeardownBlocked)
		}
		return nil
	}
	ripe, wait := dr.memory.observe(key, candidates, wall, settle, true)
	res.Requeue = wait
	if len(ripe) == 0 {
		return nil
	}
	var errs []error
	confirmed, adopted, err := dr.confirm(ctx, goc, principalNS, key, ripe)
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
	leaving, agents := dr.memory.size(key, departing, rec.clusters())
	breaker := judgeWave(Wave{Leaving: leaving, Agents: agents, MaxPercent: dr.Config.MaxRevocationPercent, Settle: dr.Config.DepartureSettle,
		Approval: goc.Annotations[v1alpha1.AnnotationApproveRevocation], GitOpsCluster: types.NamespacedName{Namespace: goc.Namespace, Name: goc.Name}})
	if breaker.Paused != "" {
		res.Paused = breaker.Paused
		return errs
	}
	approved, failed := breaker.Tripped, len(errs)
	unregistered, blocked, err := unregistrar{dr.Hub}.revoke(ctx, store, rec, confirmed, ledger.CauseDeparted, now, nil)
	if err != nil {
		errs = append(errs, err)
	}
	dr.memory.revoked(key, unregistered, time.Now())
	res.Pending -= len(unregistered)
	if len(unregistered) > 0 {
		res.Events = append(res.Events, config.Normal("AgentRevoked", "RevokeAgent",
			"%s left the selection: cluster secrets deleted, %d certificate(s) blocked on the principal in %s", ownership.Summarize(unregistered), blocked, principalNS))
	}
	// An approval covers the wave it approves: once all of it is revoked, it is taken back, so a
	// later mass departure of the same count waits for a person again.
	if approved && len(errs) == failed && res.Pending == 0 {
		if err := dr.consumeApproval(ctx, goc); err != nil {
			errs = append(errs, err)
		} else {
			dr.memory.approved(key)
		}
	}
	return errs
}

// consumeApproval removes the approval annotation a pass has used.
func (dr departureRevoker) consumeApproval(ctx context.Context, goc *v1alpha1.GitOpsCluster) error {
	if _, ok := goc.Annotations[v1alpha1.AnnotationApproveRevocation]; !ok {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationApproveRevocation: nil}}})
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(dr.Client.Patch(ctx, goc, client.RawPatch(types.MergePatchType, patch)))
}

// confirm returns the ripe departures a live read of every decision confirms: still
// not owned on this principal. Those another GitOpsCluster of the principal owns now are
// adopted (returned apart): their agents stay. A live read that cannot see the selection
// confirms nothing, and one that sees no decision at all restarts every departure's wait.
func (dr departureRevoker) confirm(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS, key string, ripe []string) (confirmed, adopted []string, _ error) {
	owners, why, unseen, err := dr.liveOwners(ctx, goc)
	if err != nil {
		return nil, nil, err
	}
	if unseen {
		dr.memory.restart(key)
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
		dr.memory.forget(key, c)
		adopted = append(adopted, c)
		if err := adoptLedger(ctx, dr.Client, principalNS, c, owner); err != nil {
			return confirmed, adopted, err
		}
	}
	return confirmed, adopted, nil
}

// liveOwners reads every PlacementDecision and GitOpsCluster from the API server (not the
// cache) and returns, for every cluster some live GitOpsCluster selects, its owner (the oldest
// such GitOpsCluster). It returns a reason instead when goc's own Placement reads as unknown,
// and unseen when none of its decisions can be read at all.
func (dr departureRevoker) liveOwners(ctx context.Context, goc *v1alpha1.GitOpsCluster) (_ map[string]*v1alpha1.GitOpsCluster, why string, unseen bool, _ error) {
	reader := dr.Reader
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
