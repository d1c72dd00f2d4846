package revocation

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/selection"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
)

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
	store := LedgerStore(v.Hub, principalNS)
	var errs []error

	// 1. A person's revocation: immediate, whatever the Placement says, and lasting: a cluster
	// listed in spec.revokedClusters gets an AgentRevocation on the principal, which only its
	// deletion lifts (Enforcer).
	errs = v.revokeByPerson(ctx, goc, store, principalNS, obs, rec, now, &res)

	// 2. Departures.
	errs = append(errs, departureRevoker{Hub: v.Hub, memory: v.Departures}.revoke(ctx, goc, store, principalNS, obs, rec, now, &res)...)

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
		unregistered, blocked, err := unregistrar{v.Hub}.revoke(ctx, store, rec, byPerson, ledger.CauseRevoked, now, nil)
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

// requestRevocations makes the AgentRevocation of every cluster goc lists in
// spec.revokedClusters and owns (or has records for) on its principal, so that the revocation
// outlives the list: editing the list, re-creating the GitOpsCluster or another GitOpsCluster
// taking the cluster over never lifts it. A GitOpsCluster cannot revoke a cluster it does not
// own, nor one whose ledger has no live owner. It returns an Event for each it made.
func (v *Revoker) requestRevocations(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string, obs *selection.Observation, rec Records) ([]config.Event, error) {
	var errs []error
	var events []config.Event
	// The principal's own: a revocation elsewhere may be lifted while this list still names
	// the cluster.
	for _, c := range sets.List(sets.New(goc.Spec.RevokedClusters...).Difference(rec.RevocationsHere)) {
		// Only a cluster this GitOpsCluster owns, or has registered: an ownerless ledger (a
		// cluster that left another GitOpsCluster) belongs to nobody's list.
		_, hasSecret := rec.Secrets[c]
		owner, hasLedger := rec.Ledgers[c]
		ownLedger := hasLedger && owner == ledger.Owner{Namespace: goc.Namespace, Name: goc.Name}
		if !obs.Owned.Has(c) && !hasSecret && !ownLedger {
			continue
		}
		// Records left from before another GitOpsCluster took the cluster over do not make it
		// this one's: an AgentRevocation holds on every principal, and the new owner's people
		// could not lift one made here.
		if !obs.Owned.Has(c) {
			selectors, err := ownership.SelectorsOf(ctx, v.Client, c)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(selectors) > 0 && (selectors[0].Namespace != goc.Namespace || selectors[0].Name != goc.Name) {
				continue
			}
		}
		rev := &v1alpha1.AgentRevocation{
			ObjectMeta: metav1.ObjectMeta{Namespace: principalNS, Name: c,
				Labels:      map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue},
				Annotations: map[string]string{v1alpha1.AnnotationRequestedBy: goc.Namespace + "/" + goc.Name}},
			Spec: v1alpha1.AgentRevocationSpec{Reason: fmt.Sprintf("listed in spec.revokedClusters of GitOpsCluster %s/%s", goc.Namespace, goc.Name)},
		}
		err := v.Client.Create(ctx, rev)
		switch {
		case err == nil:
			events = append(events, config.Warning("AgentRevocationRequested", "RevokeAgent",
				"cluster %s is listed in spec.revokedClusters: created AgentRevocation %s/%s, which holds until a person deletes it", c, principalNS, c))
		case apierrors.IsAlreadyExists(err):
		default:
			errs = append(errs, fmt.Errorf("creating the AgentRevocation of cluster %s: %w", c, err))
		}
	}
	return events, errors.Join(errs...)
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
	store := LedgerStore(v.Hub, principalNS)
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
			if err := adoptLedger(ctx, v.Client, principalNS, c, selectors[0]); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		leaving = append(leaving, c)
	}
	// A deletion reads nothing of a cluster's records once its batch is through: letting go of
	// them there frees the secrets the cache has already dropped while the rest go on.
	unregistered, blocked, err := unregistrar{v.Hub}.revoke(ctx, store, rec, leaving, ledger.CauseDeparted, now, rec.forget)
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
