package gitopscluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/finalizers"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownwrites"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/principal"
)

// Reconciler turns one GitOpsCluster into its fleet objects and status.
type Reconciler struct {
	Client client.Client
	// APIReader reads around the cache where a stale read would do harm; nil uses Client.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Config    Config

	// ComponentsAddOns caches the components addon's ManagedClusterAddOns; SetupWithManager
	// makes it when nil.
	ComponentsAddOns cache.Cache

	departures   departures
	exclusive    exclusiveCache
	statusWrites ownwrites.Tracker
}

// observation is what a reconcile learned about the world before writing anything.
type observation struct {
	placementFound bool
	// selected is nil when the selection is unknown (Placement missing): nothing is torn down then.
	selected sets.Set[string]
	// owned are the selected clusters this GitOpsCluster owns (not owned by an older one).
	owned sets.Set[string]
	// teardownBlocked says why the selection cannot be trusted to remove anything ("" when it
	// can): the Placement is missing or being deleted, has no decisions, or they are mid-update.
	teardownBlocked string
	// invalid maps selected clusters whose names cannot be agent names to the reason.
	invalid  map[string]string
	conflict []string
}

// trustedOwned is owned when the selection can be trusted to remove things, else nil.
func (o *observation) trustedOwned() sets.Set[string] {
	if o.selected == nil || o.teardownBlocked != "" {
		return nil
	}
	return o.owned
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	goc := &v1alpha1.GitOpsCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, goc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A pass woken by this manager's own status write works from the written status.
	if err := r.statusWrites.Fresh(ctx, r.Client, goc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !goc.DeletionTimestamp.IsZero() {
		r.statusWrites.Forget(goc.UID)
		return ctrl.Result{}, r.finalize(ctx, goc)
	}
	if !controllerutil.ContainsFinalizer(goc, v1alpha1.Finalizer) {
		if err := finalizers.Add(ctx, r.Client, goc, v1alpha1.Finalizer); err != nil {
			return ctrl.Result{}, err
		}
	}

	status := goc.Status.DeepCopy()
	// configRollout: an older AddOnDeploymentConfig is still in use by a rollout in progress.
	configRollout := false
	// foreign is what the probes found; syncProbes acts on it after the status is written.
	var foreign foreignReport
	// componentsWaiting: the components' entry waits for its Placement copy (applyComponents).
	componentsWaiting := false
	status.ObservedGeneration = goc.Generation
	gen := goc.Generation
	setCond := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	// noteCond is setCond that also emits an Event (Warning unless ok) when the condition did not
	// already say this: an Event per change, not per pass.
	noteCond := func(t string, ok bool, reason, action, msg string) {
		if c := meta.FindStatusCondition(goc.Status.Conditions, t); c == nil || c.Reason != reason || (c.Status == metav1.ConditionTrue) != ok {
			eventType := corev1.EventTypeWarning
			if ok {
				eventType = corev1.EventTypeNormal
			}
			r.event(goc, eventType, reason, action, "%s", msg)
		}
		setCond(t, ok, reason, msg)
	}
	principalNS := names.PrincipalNamespace(goc)

	// 1. Placement.
	obs, err := r.observePlacement(ctx, goc, principalNS)
	if err != nil {
		setCond(v1alpha1.ConditionPlacementResolved, false, v1alpha1.ReasonPlacementReadFailed, err.Error())
		return ctrl.Result{}, errors.Join(err, r.writeStatus(ctx, goc, status))
	}
	if !obs.placementFound {
		obs.teardownBlocked = "the Placement does not exist"
		setCond(v1alpha1.ConditionPlacementResolved, false, v1alpha1.ReasonPlacementNotFound,
			fmt.Sprintf("Placement %s/%s not found; create it (cluster.open-cluster-management.io/v1beta1) in the GitOpsCluster's namespace", goc.Namespace, goc.Spec.PlacementRef.Name))
	} else {
		msg := fmt.Sprintf("Placement %s selects %d cluster(s)", goc.Spec.PlacementRef.Name, obs.selected.Len())
		if len(obs.invalid) > 0 {
			msg += fmt.Sprintf("; skipped cluster names that are not valid agent names: %s", summarize(slices.Sorted(maps.Keys(obs.invalid))))
		}
		setCond(v1alpha1.ConditionPlacementResolved, true, v1alpha1.ReasonPlacementResolved, msg)
	}
	if obs.selected != nil {
		status.SelectedClusters = int32(obs.selected.Len())
	} else {
		// No Placement, nothing selected: stale counts would read as a healthy fleet.
		status.SelectedClusters, status.AvailableAgents, status.UnavailableClusters = 0, 0, nil
	}

	// 2. Principal endpoint.
	disc, err := principal.DiscoverKeeping(ctx, r.Client, goc.Spec.ArgoCDAgentAddon, types.NamespacedName{Namespace: principalNS, Name: r.Config.PrincipalServiceName}, goc.Status.Principal)
	if err != nil {
		return ctrl.Result{}, err
	}
	if disc.Endpoint != nil {
		if status.Principal == nil || *status.Principal != *disc.Endpoint {
			r.event(goc, corev1.EventTypeNormal, "PrincipalDiscovered", "Discover", disc.Message)
		}
		status.Principal = disc.Endpoint
	}
	setCond(v1alpha1.ConditionPrincipalDiscovered, disc.Endpoint != nil, disc.Reason, disc.Message)

	// 3. Hub PKI.
	notAllowed, err := fleet.PrincipalAllowed(ctx, r.Client, goc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !r.namespaceManaged(principalNS) || notAllowed != "" {
		reason := v1alpha1.ReasonNamespaceNotManaged
		msg := fmt.Sprintf("the manager may not manage Secrets in principal namespace %s; add it to the manager's --managed-namespaces (Helm value managedNamespaces)", principalNS)
		if notAllowed != "" {
			reason = v1alpha1.ReasonPrincipalNotAllowed
			msg = fmt.Sprintf("this GitOpsCluster may not use the principal in namespace %s: %s", principalNS, notAllowed)
		}
		setCond(v1alpha1.ConditionCertificatesReady, false, reason, msg)
		setCond(v1alpha1.ConditionAddOnConfigured, false, reason, msg)
		if err := r.observeAgents(ctx, obs, status, setCond); err != nil {
			return ctrl.Result{}, err
		}
		setCond(v1alpha1.ConditionReady, false, v1alpha1.ReasonNotReady, msg)
		r.event(goc, corev1.EventTypeWarning, reason, "IssueCertificates", msg)
		return ctrl.Result{}, r.writeStatus(ctx, goc, status)
	}
	var hosts []string
	if disc.Endpoint != nil {
		hosts = append(hosts, disc.Endpoint.Address)
	}
	others, err := r.principalHostsOfOthers(ctx, goc, principalNS)
	if err != nil {
		return ctrl.Result{}, err
	}
	setting, decider, err := r.principalPKISetting(ctx, goc, principalNS)
	if err != nil {
		return ctrl.Result{}, err
	}
	if own := settingOf(goc); !own.equal(setting) {
		err = &pkiProblem{Reason: v1alpha1.ReasonPKIConflict, Message: fmt.Sprintf(
			"this GitOpsCluster asks for %s, but the PKI of principal namespace %s follows the older GitOpsCluster %s/%s, which asks for %s; give every GitOpsCluster of that principal the same spec.argoCDAgentAddon.certManager",
			own, principalNS, decider.Namespace, decider.Name, setting)}
	}
	var hub *hubPKI
	if err == nil {
		hub, err = r.ensureHubPKI(ctx, principalNS, append(hosts, others...), setting)
	}
	if problem, ok := asPKIProblem(err); ok {
		noteCond(v1alpha1.ConditionCertificatesReady, false, problem.Reason, "IssueCertificates", problem.Message)
		if err := r.observeAgents(ctx, obs, status, setCond); err != nil {
			return ctrl.Result{}, err
		}
		setCond(v1alpha1.ConditionReady, false, v1alpha1.ReasonNotReady, problem.Message)
		return ctrl.Result{RequeueAfter: certManagerRecheck}, r.writeStatus(ctx, goc, status)
	}
	if err != nil {
		setCond(v1alpha1.ConditionCertificatesReady, false, v1alpha1.ReasonCertificatesFailed, err.Error())
		r.event(goc, corev1.EventTypeWarning, v1alpha1.ReasonCertificatesFailed, "IssueCertificates", err.Error())
		return ctrl.Result{}, errors.Join(err, r.writeStatus(ctx, goc, status))
	}
	if hub.EmergencyRotation != "" {
		r.event(goc, corev1.EventTypeWarning, "CAEmergencyRotation", "IssueCertificates", "%s", hub.EmergencyRotation)
	}
	if len(hub.Issued) > 0 {
		r.event(goc, corev1.EventTypeNormal, "CertificatesIssued", "IssueCertificates", "issued %s in namespace %s", strings.Join(hub.Issued, ", "), principalNS)
	}
	if err := r.restartPrincipalIfNeeded(ctx, goc, principalNS, hub.PrincipalCertHash, hub.JWTKeyRotatedFor); err != nil {
		return ctrl.Result{}, err
	}
	r.checkSignerExclusive(ctx, goc, principalNS, setCond)

	// 4. Agent registration secrets on the principal, and revocation of the agents that go.
	// One read of the cluster secrets and ledgers serves both: the revocation acts only on
	// clusters the sync leaves alone.
	rec, err := r.readAgentRecords(ctx, goc, principalNS)
	if err != nil {
		return ctrl.Result{}, err
	}
	clusterRenewal, err := r.syncClusterSecrets(ctx, goc, principalNS, obs, hub, rec.secrets, rec.revoked)
	if err != nil {
		setCond(v1alpha1.ConditionCertificatesReady, false, v1alpha1.ReasonCertificatesFailed, err.Error())
		return ctrl.Result{}, errors.Join(err, r.writeStatus(ctx, goc, status))
	}
	revocation, revErr := r.reconcileRevocation(ctx, goc, principalNS, obs, rec)
	status.RevokedAgents = int32(revocation.revoked)
	status.PendingDepartures = int32(revocation.pending)
	if revocation.paused != "" {
		if !meta.IsStatusConditionTrue(goc.Status.Conditions, v1alpha1.ConditionRevocationPaused) {
			r.event(goc, corev1.EventTypeWarning, "RevocationPaused", "RevokeAgents", revocation.paused)
		}
		setCond(v1alpha1.ConditionRevocationPaused, true, v1alpha1.ReasonTooManyDepartures, revocation.paused)
	} else if obs.teardownBlocked != "" && revocation.pending > 0 {
		setCond(v1alpha1.ConditionRevocationPaused, true, v1alpha1.ReasonSelectionUnknown,
			fmt.Sprintf("%d agent(s) outside the selection are kept: %s; nothing is revoked until the selection is known", revocation.pending, obs.teardownBlocked))
	} else {
		setCond(v1alpha1.ConditionRevocationPaused, false, v1alpha1.ReasonRevocationAllowed,
			fmt.Sprintf("agents leaving the selection are revoked after %s and a live check; %d pending", r.Config.DepartureSettle, revocation.pending))
	}
	r.reportBlocklistRoom(goc, principalNS, revocation, setCond)
	if revErr != nil {
		return ctrl.Result{}, errors.Join(revErr, r.writeStatus(ctx, goc, status))
	}
	if hub.Problem != nil {
		noteCond(v1alpha1.ConditionCertificatesReady, false, hub.Problem.Reason, "IssueCertificates", hub.Problem.Message+"; agents keep using the CA already in namespace "+principalNS)
	} else if hub.Waiting != "" {
		// Every certificate in use is valid and every agent still connects: the fleet stays
		// Ready while the new anchor rolls out, so routine rotations raise no alert.
		noteCond(v1alpha1.ConditionCertificatesReady, true, v1alpha1.ReasonWaitingForTrustRollout, "IssueCertificates", hub.Waiting)
	} else {
		msg := fmt.Sprintf("CA, principal, resource-proxy and JWT secrets are in namespace %s (%s); %d agent cluster secret(s)", principalNS, setting, obs.owned.Len())
		if hub.Notice != "" {
			msg += "; " + hub.Notice
			r.event(goc, corev1.EventTypeWarning, v1alpha1.ReasonWaitingForTrustRollout, "IssueCertificates", hub.Notice)
		}
		setCond(v1alpha1.ConditionCertificatesReady, true, v1alpha1.ReasonCertificatesIssued, msg)
	}

	// 5. OCM addon objects. The clusters the Argo CD components may go to are cleared first:
	// the components' Placement selects only cleared clusters, so a cluster running them must
	// carry its label before that Placement requires it (an upgrade keeps what runs).
	if obs.selected != nil {
		if foreign, err = r.clearForComponents(ctx, goc, obs.selected, obs.invalid, obs.teardownBlocked != ""); err != nil {
			return ctrl.Result{}, err
		}
	}
	// One GitOpsCluster per Placement writes its entry of the
	// ClusterManagementAddOn (entries are keyed by Placement): the oldest.
	placementOwner, err := fleet.PlacementOwner(ctx, r.Client, goc.Namespace, goc.Spec.PlacementRef.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if placementOwner != nil && (placementOwner.Namespace != goc.Namespace || placementOwner.Name != goc.Name) {
		msg := fmt.Sprintf("Placement %s/%s is already used by the older GitOpsCluster %s/%s, which configures the agents of its clusters; point this GitOpsCluster at another Placement, or delete one of them",
			goc.Namespace, goc.Spec.PlacementRef.Name, placementOwner.Namespace, placementOwner.Name)
		noteCond(v1alpha1.ConditionAddOnConfigured, false, v1alpha1.ReasonPlacementInUse, "ApplyAddOn", msg)
		// Release whatever this GitOpsCluster applied before the other one came first.
		if err := r.releaseAddOnEntries(ctx, goc); err != nil {
			return ctrl.Result{}, err
		}
	} else if disc.Endpoint == nil {
		setCond(v1alpha1.ConditionAddOnConfigured, false, disc.Reason, "waiting for the principal endpoint: "+disc.Message)
	} else if applied, err := r.applyAddOn(ctx, goc, principalNS, disc.Endpoint, hub, obs.trustedOwned()); err != nil {
		setCond(v1alpha1.ConditionAddOnConfigured, false, v1alpha1.ReasonAddOnApplyFailed, err.Error())
		r.event(goc, corev1.EventTypeWarning, v1alpha1.ReasonAddOnApplyFailed, "ApplyAddOn", err.Error())
		return ctrl.Result{}, errors.Join(err, r.writeStatus(ctx, goc, status))
	} else {
		name := applied.template
		componentsWaiting = applied.componentsWaiting
		status.AddOnTemplate = applied.template
		status.AddOnDeploymentConfig = applied.config
		if obs.selected != nil {
			if status.ExistingArgoCDClusters, err = r.existingArgoCDClusters(ctx, goc, obs.selected); err != nil {
				return ctrl.Result{}, err
			}
			r.reportForeign(goc, status, foreign, setCond)
			waiting, err := r.pruneDeploymentConfigs(ctx, goc, applied.config, sets.List(obs.selected))
			if err != nil {
				return ctrl.Result{}, err
			}
			configRollout = waiting
		}
		mappingConflict, err := r.applicationMappingConflict(ctx, goc, principalNS)
		if err != nil {
			return ctrl.Result{}, err
		}
		if len(obs.conflict) > 0 {
			setCond(v1alpha1.ConditionAddOnConfigured, false, v1alpha1.ReasonClusterConflict,
				"clusters selected by more than one GitOpsCluster (one ManagedClusterAddOn can carry only one configuration): "+summarize(obs.conflict))
		} else if mappingConflict != "" {
			noteCond(v1alpha1.ConditionAddOnConfigured, false, v1alpha1.ReasonApplicationMappingConflict, "ApplyAddOn", mappingConflict)
		} else {
			msg := fmt.Sprintf("ClusterManagementAddOn %s lists Placement %s/%s with AddOnTemplate %s", r.Config.AddonName, goc.Namespace, goc.Spec.PlacementRef.Name, name)
			setCond(v1alpha1.ConditionAddOnConfigured, true, v1alpha1.ReasonAddOnApplied, msg+applied.clusterConfigs.notes())
		}
	}

	// 6. Agent availability, and agents a version change has not reached yet.
	if err := r.observeAgents(ctx, obs, status, setCond); err != nil {
		return ctrl.Result{}, err
	}
	if obs.selected != nil && r.namespaceManaged(principalNS) {
		if status.AgentsOnOtherVersion, err = r.agentsOnOtherVersion(ctx, goc, principalNS, sets.List(obs.selected)); err != nil {
			return ctrl.Result{}, err
		}
	}

	// 7. Summary.
	ready, notReady := true, []string{}
	for _, t := range []string{v1alpha1.ConditionPlacementResolved, v1alpha1.ConditionPrincipalDiscovered, v1alpha1.ConditionCertificatesReady, v1alpha1.ConditionAddOnConfigured, v1alpha1.ConditionAgentsAvailable} {
		if !meta.IsStatusConditionTrue(status.Conditions, t) {
			ready = false
			notReady = append(notReady, t)
		}
	}
	wasReady := meta.IsStatusConditionTrue(goc.Status.Conditions, v1alpha1.ConditionReady)
	if ready {
		setCond(v1alpha1.ConditionReady, true, v1alpha1.ReasonReady, fmt.Sprintf("%d of %d agent(s) available", status.AvailableAgents, status.SelectedClusters))
		if !wasReady {
			r.event(goc, corev1.EventTypeNormal, "Ready", "Reconcile", "the argocd-agent fleet is ready")
		}
	} else {
		setCond(v1alpha1.ConditionReady, false, v1alpha1.ReasonNotReady, "not true yet: "+strings.Join(notReady, ", "))
		if wasReady {
			r.event(goc, corev1.EventTypeWarning, "NotReady", "Reconcile", "the argocd-agent fleet is no longer ready: %s", strings.Join(notReady, ", "))
		}
	}
	if err := r.writeStatus(ctx, goc, status); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.syncProbes(ctx, goc, foreign); err != nil {
		return ctrl.Result{}, err
	}

	if componentsWaiting {
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	if configRollout {
		// ManagedClusterAddOn config changes wake this reconcile; this is only a safety net.
		return ctrl.Result{RequeueAfter: 2 * time.Minute}, nil
	}
	if revocation.requeue > 0 {
		return ctrl.Result{RequeueAfter: revocation.requeue}, nil
	}
	next := hub.NextRenewal
	if !clusterRenewal.IsZero() && (next.IsZero() || clusterRenewal.Before(next)) {
		next = clusterRenewal
	}
	if !next.IsZero() {
		wait := next.Sub(r.Config.Now())
		if wait < time.Second {
			wait = time.Second
		}
		logger.V(1).Info("next certificate renewal", "after", wait)
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) observePlacement(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string) (*observation, error) {
	obs := &observation{owned: sets.New[string](), invalid: map[string]string{}}
	pl := &clusterv1beta1.Placement{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: goc.Spec.PlacementRef.Name}, pl); err != nil {
		if apierrors.IsNotFound(err) {
			return obs, nil
		}
		return nil, fmt.Errorf("reading Placement %s/%s: %w", goc.Namespace, goc.Spec.PlacementRef.Name, err)
	}
	obs.placementFound = true
	selected, pages, err := fleet.SelectedClustersAndPages(ctx, r.Client, goc.Namespace, goc.Spec.PlacementRef.Name)
	if err != nil {
		return nil, err
	}
	obs.selected = selected
	obs.teardownBlocked = fleet.SelectionUnknown(pl, selected, pages)
	// Ownership in one pass: every other live GitOpsCluster's selection is read once (from the
	// cache), not looked up again for each selected cluster.
	others, err := r.otherSelections(ctx, goc)
	if err != nil {
		return nil, err
	}
	for _, c := range sets.List(selected) {
		if why := names.ValidAgentName(c, principalNS); why != "" {
			obs.invalid[c] = why
			continue
		}
		var otherNames []string
		ownedByUs := true
		for _, o := range others {
			if !o.selected.Has(c) {
				continue
			}
			// Sharing the Placement is reported as PlacementInUse, not per cluster.
			if o.goc.Namespace != goc.Namespace || o.goc.Spec.PlacementRef.Name != goc.Spec.PlacementRef.Name {
				otherNames = append(otherNames, o.goc.Namespace+"/"+o.goc.Name)
			}
			if fleet.Less(o.goc, goc) {
				ownedByUs = false
			}
		}
		if len(otherNames) > 0 {
			obs.conflict = append(obs.conflict, fmt.Sprintf("%s (also selected by GitOpsCluster %s)", c, strings.Join(otherNames, ", ")))
		}
		if ownedByUs {
			obs.owned.Insert(c)
		}
	}
	return obs, nil
}

type selection struct {
	goc      *v1alpha1.GitOpsCluster
	selected sets.Set[string]
}

// otherSelections returns every other live GitOpsCluster with the clusters its Placement
// selects, in precedence order.
func (r *Reconciler) otherSelections(ctx context.Context, goc *v1alpha1.GitOpsCluster) ([]selection, error) {
	var list v1alpha1.GitOpsClusterList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	byPlacement := map[string]sets.Set[string]{}
	var out []selection
	for i := range list.Items {
		o := &list.Items[i]
		if (o.Namespace == goc.Namespace && o.Name == goc.Name) || !o.DeletionTimestamp.IsZero() {
			continue
		}
		key := fleet.PlacementKey(o.Namespace, o.Spec.PlacementRef.Name)
		sel, ok := byPlacement[key]
		if !ok {
			var err error
			if sel, err = fleet.SelectedClusters(ctx, r.Client, o.Namespace, o.Spec.PlacementRef.Name); err != nil {
				return nil, err
			}
			byPlacement[key] = sel
		}
		out = append(out, selection{goc: o, selected: sel})
	}
	sort.Slice(out, func(i, j int) bool { return fleet.Less(out[i].goc, out[j].goc) })
	return out, nil
}

// principalHostsOfOthers returns the principal addresses other GitOpsClusters sharing this
// principal namespace hand to their agents, so the one serving certificate covers them all and
// two GitOpsClusters never re-issue it back and forth.
func (r *Reconciler) principalHostsOfOthers(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string) ([]string, error) {
	var list v1alpha1.GitOpsClusterList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []string
	for i := range list.Items {
		o := &list.Items[i]
		if (o.Namespace == goc.Namespace && o.Name == goc.Name) || !o.DeletionTimestamp.IsZero() || names.PrincipalNamespace(o) != principalNS {
			continue
		}
		if o.Spec.ArgoCDAgentAddon.PrincipalServerAddress != "" {
			out = append(out, o.Spec.ArgoCDAgentAddon.PrincipalServerAddress)
		} else if o.Status.Principal != nil {
			out = append(out, o.Status.Principal.Address)
		}
	}
	return out, nil
}

func (r *Reconciler) writeStatus(ctx context.Context, goc *v1alpha1.GitOpsCluster, status *v1alpha1.GitOpsClusterStatus) error {
	if equality.Semantic.DeepEqual(goc.Status, *status) {
		return nil
	}
	updated := goc.DeepCopy()
	updated.Status = *status
	// A merge patch carries only what differs from the copy read, so a field emptied since is
	// not cleared when that copy is older than the server's (a cache that has not seen the
	// last write): the patch is conditional on the version read, and a stale read retries.
	if err := r.Client.Status().Patch(ctx, updated, client.MergeFromWithOptions(goc, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	r.statusWrites.Wrote(goc.UID, goc.ResourceVersion, updated.ResourceVersion)
	return nil
}

func (r *Reconciler) event(goc *v1alpha1.GitOpsCluster, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(goc, nil, eventType, reason, action, note, args...)
	}
}

// summarize keeps messages bounded on fleets of thousands of clusters.
func summarize(items []string) string {
	sort.Strings(items)
	if len(items) <= maxListedClusters {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxListedClusters], ", "), len(items)-maxListedClusters)
}

// namespaceManaged reports whether the manager may keep secrets in ns.
func (r *Reconciler) namespaceManaged(ns string) bool {
	if len(r.Config.ManagedNamespaces) == 0 {
		return true
	}
	for _, m := range r.Config.ManagedNamespaces {
		if m == ns {
			return true
		}
	}
	return false
}
