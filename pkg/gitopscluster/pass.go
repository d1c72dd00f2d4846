package gitopscluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/addonobjects"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/principalpki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/readiness"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/revocation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/selection"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/principal"
)

// pass is one reconcile of a live GitOpsCluster: what its phases read and decided, and the
// status they build. No phase writes it: reconcileNormal writes it once, whether the phases
// all ran or one stopped the pass, and every Event of the pass is born in note or event.
type pass struct {
	r           *Reconciler
	goc         *v1alpha1.GitOpsCluster
	status      *v1alpha1.GitOpsClusterStatus
	principalNS string

	obs  *selection.Observation
	disc principal.Result
	// members are the GitOpsClusters that may use the principal (read in the pki phase).
	members        ownership.Members
	setting        principalpki.Setting
	hub            *principalpki.PKI
	clusterRenewal time.Time
	revocation     revocation.Result
	// foreign is what the probes found; SyncProbes acts on it after the status is written.
	foreign addonobjects.ForeignReport
	// configRollout: an older AddOnDeploymentConfig is still in use by a rollout in progress.
	configRollout bool
	// componentsWaiting: the components' entry waits for its Placement copy (see addonobjects.Applied).
	componentsWaiting bool
}

// stop ends a pass early with this result.
type stop struct {
	res ctrl.Result
	err error
	// said: the phase set the condition that says why it stopped, and Ready is left as it was.
	said bool
	// notReady, when set, is why the fleet is not Ready: what follows needs what is missing.
	notReady string
}

// stopWith stops the pass on err, which Ready then reports (ReasonReconcileError).
func stopWith(err error) *stop { return &stop{err: err} }

// reconcileNormal runs the phases of a live GitOpsCluster in order; a phase that returns a stop
// ends the pass there, and conclude says why in Ready. Otherwise Ready summarizes the
// conditions. Then the status is written, once, and the probes follow what it says.
func (r *Reconciler) reconcileNormal(ctx context.Context, goc *v1alpha1.GitOpsCluster) (ctrl.Result, error) {
	p := &pass{r: r, goc: goc, status: goc.Status.DeepCopy(), principalNS: names.PrincipalNamespace(goc)}
	p.status.ObservedGeneration = goc.Generation
	// How long each step took, logged at V(1): on a large fleet it says where a pass spends
	// its time.
	var took []any
	timed := func(name string, step func() error) error {
		start := time.Now()
		err := step()
		took = append(took, name, time.Since(start).Round(time.Millisecond).String())
		return err
	}
	defer func() { log.FromContext(ctx).V(1).Info("pass", took...) }()
	phases := []struct {
		name string
		run  func(context.Context) *stop
	}{{"placement", p.placement}, {"discovery", p.discovery}, {"pki", p.pki}, {"agentRecords", p.agentRecords}, {"addOn", p.addOn}, {"availability", p.availability}}
	var s *stop
	for _, phase := range phases {
		_ = timed(phase.name, func() error { s = phase.run(ctx); return nil })
		if s != nil {
			s.err = p.conclude(ctx, phase.name, s)
			break
		}
	}
	if s == nil {
		p.summarize()
	}
	if s != nil && s.err != nil && !s.said && apierrors.IsConflict(s.err) {
		// A write that lost a race is retried at once, and says nothing.
		return s.res, s.err
	}
	// The pass's one status write.
	written := timed("status", func() error { return p.r.writeStatus(ctx, goc, p.status) })
	if s != nil {
		return s.res, errors.Join(s.err, written)
	}
	if written != nil {
		return ctrl.Result{}, written
	}
	var moreProbes bool
	if err := timed("probes", func() (err error) { moreProbes, err = r.probes().SyncProbes(ctx, goc, p.foreign); return err }); err != nil {
		return ctrl.Result{}, err
	}
	if err := p.foreign.ClearanceError(); err != nil {
		// Its Event said so; the labels are written again with the controller's backoff.
		return ctrl.Result{}, err
	}
	if moreProbes {
		// The next batch, and the probes held back until the cache shows them, a second later.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return p.requeue(ctx), nil
}

// conclude sets Ready for a pass that phase stopped with s, and returns the pass's error.
func (p *pass) conclude(ctx context.Context, phase string, s *stop) error {
	switch {
	case s.notReady != "":
		if err := readiness.Agents(ctx, p.r.Client, p.r.Config.AddonName, p.obs, p.status, p.setCond); err != nil {
			p.setCond(v1alpha1.ConditionReady, false, v1alpha1.ReasonReconcileError, fmt.Sprintf("%s: %v", phase, err))
			return errors.Join(s.err, err)
		}
		p.setCond(v1alpha1.ConditionReady, false, v1alpha1.ReasonNotReady, s.notReady)
	case s.err != nil && !s.said && !apierrors.IsConflict(s.err):
		// Ready says why this pass stopped until one gets past it.
		p.setCond(v1alpha1.ConditionReady, false, v1alpha1.ReasonReconcileError, fmt.Sprintf("%s: %v", phase, s.err))
	}
	return s.err
}

// setCond sets a condition of the status being built.
func (p *pass) setCond(t string, ok bool, reason, msg string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&p.status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: p.goc.Generation})
}

// noteCond is setCond that also emits an Event (Warning unless ok) when the condition did not
// already say this: an Event per change, not per pass.
func (p *pass) noteCond(t string, ok bool, reason, action, msg string) {
	eventType := corev1.EventTypeWarning
	if ok {
		eventType = corev1.EventTypeNormal
	}
	p.note(eventType, t, ok, reason, action, msg)
}

// note is setCond with an Event of eventType when the condition changes status or reason. With
// event, it is where the pass's Events are born.
func (p *pass) note(eventType, t string, ok bool, reason, action, msg string) {
	if c := meta.FindStatusCondition(p.goc.Status.Conditions, t); c == nil || c.Reason != reason || (c.Status == metav1.ConditionTrue) != ok {
		p.event(eventType, reason, action, msg)
	}
	p.setCond(t, ok, reason, msg)
}

// event records what the pass did (an Event that no condition stands for).
func (p *pass) event(eventType, reason, action, msg string) {
	p.r.event(p.goc, eventType, reason, action, "%s", msg)
}

// emit records the Events a part returned with its result.
func (p *pass) emit(events []config.Event) { p.r.emit(p.goc, events) }

// fail records err in condition t with reason, with an Event when it says something new, and
// stops the pass.
func (p *pass) fail(t, reason, action string, err error) *stop {
	p.noteCond(t, false, reason, action, err.Error())
	return &stop{err: err, said: true}
}

// notReady stops the pass with Ready False for msg: what follows needs what is missing.
func (p *pass) notReady(msg string, res ctrl.Result) *stop {
	return &stop{res: res, notReady: msg}
}

// placement reads the selection.
func (p *pass) placement(ctx context.Context) *stop {
	goc := p.goc
	obs, err := selection.Observe(ctx, p.r.Client, goc, p.principalNS)
	if err != nil {
		return p.fail(v1alpha1.ConditionPlacementResolved, v1alpha1.ReasonPlacementReadFailed, "ResolvePlacement", err)
	}
	p.obs = obs
	if !obs.PlacementFound {
		obs.TeardownBlocked = "the Placement does not exist"
		p.setCond(v1alpha1.ConditionPlacementResolved, false, v1alpha1.ReasonPlacementNotFound,
			fmt.Sprintf("Placement %s/%s not found; create it (cluster.open-cluster-management.io/v1beta1) in the GitOpsCluster's namespace", goc.Namespace, goc.Spec.PlacementRef.Name))
	} else {
		msg := fmt.Sprintf("Placement %s selects %d cluster(s)", goc.Spec.PlacementRef.Name, obs.Selected.Len())
		if len(obs.Invalid) > 0 {
			msg += fmt.Sprintf("; skipped cluster names that are not valid agent names: %s", ownership.Summarize(slices.Sorted(maps.Keys(obs.Invalid))))
		}
		p.setCond(v1alpha1.ConditionPlacementResolved, true, v1alpha1.ReasonPlacementResolved, msg)
	}
	if obs.Selected != nil {
		p.status.SelectedClusters = int32(obs.Selected.Len())
	} else {
		// No Placement, nothing selected: stale counts would read as a healthy fleet.
		p.status.SelectedClusters, p.status.AvailableAgents, p.status.UnavailableClusters = 0, 0, nil
	}
	return nil
}

// discovery finds the principal endpoint.
func (p *pass) discovery(ctx context.Context) *stop {
	goc := p.goc
	disc, err := principal.DiscoverKeeping(ctx, p.r.Client, goc.Spec.ArgoCDAgentAddon, types.NamespacedName{Namespace: p.principalNS, Name: p.r.Config.PrincipalServiceName}, goc.Status.Principal)
	if err != nil {
		return stopWith(err)
	}
	p.disc = disc
	if disc.Endpoint != nil {
		if p.status.Principal == nil || *p.status.Principal != *disc.Endpoint {
			p.event(corev1.EventTypeNormal, "PrincipalDiscovered", "Discover", disc.Message)
		}
		p.status.Principal = disc.Endpoint
	}
	p.setCond(v1alpha1.ConditionPrincipalDiscovered, disc.Endpoint != nil, disc.Reason, disc.Message)
	return nil
}

// pki keeps the principal's PKI (self-managed or cert-manager's), once this GitOpsCluster may
// use the principal namespace, and restarts the principal when its certificate changed.
func (p *pass) pki(ctx context.Context) *stop {
	r, goc, principalNS := p.r, p.goc, p.principalNS
	notAllowed, err := ownership.PrincipalAllowed(ctx, r.Client, goc)
	if err != nil {
		return stopWith(err)
	}
	if !r.Config.NamespaceManaged(principalNS) || notAllowed != "" {
		reason := v1alpha1.ReasonNamespaceNotManaged
		msg := fmt.Sprintf("the manager may not manage Secrets in principal namespace %s; add it to the manager's --managed-namespaces (Helm value managedNamespaces)", principalNS)
		if notAllowed != "" {
			reason = v1alpha1.ReasonPrincipalNotAllowed
			msg = fmt.Sprintf("this GitOpsCluster may not use the principal in namespace %s: %s", principalNS, notAllowed)
		}
		p.noteCond(v1alpha1.ConditionCertificatesReady, false, reason, "IssueCertificates", msg)
		p.setCond(v1alpha1.ConditionAddOnConfigured, false, reason, msg)
		return p.notReady(msg, ctrl.Result{})
	}
	// The principal's members, read once: its PKI decision and its application mapping
	// follow them.
	if p.members, err = ownership.PrincipalMembers(ctx, r.Client, principalNS); err != nil {
		return stopWith(err)
	}
	var discovered string
	if p.disc.Endpoint != nil {
		discovered = p.disc.Endpoint.Address
	}
	decision := principalpki.Decide(goc, p.members, principalNS, discovered)
	p.setting = decision.Setting
	// The principal's PKI is decided and written once, by its elder; the others observe what
	// it keeps, and report what it has yet to write.
	keeper, elder := r.pki(), decision.IsElder
	if !elder {
		keeper = keeper.Observer(principalNS, decision.Elder.String())
	}
	if decision.Conflict != nil {
		err = decision.Conflict
	} else {
		p.hub, err = keeper.Ensure(ctx, principalNS, decision.Hosts, decision.Setting)
	}
	if problem, ok := principalpki.AsProblem(err); ok {
		p.noteCond(v1alpha1.ConditionCertificatesReady, false, problem.Reason, "IssueCertificates", problem.Message)
		return p.notReady(problem.Message, ctrl.Result{RequeueAfter: principalpki.CertManagerRecheck})
	}
	if err != nil {
		return p.fail(v1alpha1.ConditionCertificatesReady, v1alpha1.ReasonCertificatesFailed, "IssueCertificates", err)
	}
	if p.hub.EmergencyRotation != "" {
		p.event(corev1.EventTypeWarning, "CAEmergencyRotation", "IssueCertificates", p.hub.EmergencyRotation)
	}
	if len(p.hub.Issued) > 0 {
		p.event(corev1.EventTypeNormal, "CertificatesIssued", "IssueCertificates", fmt.Sprintf("issued %s in namespace %s", strings.Join(p.hub.Issued, ", "), principalNS))
	}
	if elder {
		if restarted, err := keeper.RestartPrincipalIfNeeded(ctx, goc, principalNS, p.hub.PrincipalCertHash, p.hub.JWTKeyRotatedFor); err != nil {
			return stopWith(err)
		} else if restarted {
			p.event(corev1.EventTypeNormal, "PrincipalRestarted", "RestartPrincipal", fmt.Sprintf("restarted Deployment %s/%s to load its new serving certificate or JWT signing key", principalNS, r.Config.PrincipalDeploymentName))
		}
	}
	p.checkSignerExclusive(ctx)
	return nil
}

// agentRecords keeps the agents' registration secrets on the principal and revokes the agents
// that go. One read of the cluster secrets and ledgers serves both: the revocation acts only on
// clusters the sync leaves alone. Then CertificatesReady says how the PKI stands.
func (p *pass) agentRecords(ctx context.Context) *stop {
	r, goc, principalNS, obs, hub := p.r, p.goc, p.principalNS, p.obs, p.hub
	rec, err := r.revoker().ReadRecords(ctx, goc, principalNS)
	if err != nil {
		return stopWith(err)
	}
	if p.clusterRenewal, err = r.clusterSecrets().Sync(ctx, goc, principalNS, obs, hub, rec.Secrets, rec.Revoked, revocation.LedgerStore(r.hub(), principalNS)); err != nil {
		return p.fail(v1alpha1.ConditionCertificatesReady, v1alpha1.ReasonCertificatesFailed, "IssueCertificates", err)
	}
	revoked, revErr := r.revoker().Revoke(ctx, goc, principalNS, obs, rec)
	p.emit(revoked.Events)
	p.revocation = revoked
	p.status.RevokedAgents = int32(revoked.Revoked)
	p.status.PendingDepartures = int32(revoked.Pending)
	if revoked.Paused != "" {
		p.note(corev1.EventTypeWarning, v1alpha1.ConditionRevocationPaused, true, v1alpha1.ReasonTooManyDepartures, "RevokeAgents", revoked.Paused)
	} else if obs.TeardownBlocked != "" && revoked.Pending > 0 {
		p.setCond(v1alpha1.ConditionRevocationPaused, true, v1alpha1.ReasonSelectionUnknown,
			fmt.Sprintf("%d agent(s) outside the selection are kept: %s; nothing is revoked until the selection is known", revoked.Pending, obs.TeardownBlocked))
	} else {
		p.setCond(v1alpha1.ConditionRevocationPaused, false, v1alpha1.ReasonRevocationAllowed,
			fmt.Sprintf("agents leaving the selection are revoked after %s and a live check; %d pending", r.Config.DepartureSettle, revoked.Pending))
	}
	if ok, reason, msg := revocation.BlocklistRoom(goc, principalNS, revoked); ok {
		p.setCond(v1alpha1.ConditionBlocklistHasRoom, true, reason, msg)
	} else {
		p.noteCond(v1alpha1.ConditionBlocklistHasRoom, false, reason, "RevokeAgents", msg)
	}
	if revErr != nil {
		// The conditions above say how revocation stands.
		return &stop{err: revErr, said: true}
	}
	switch {
	case hub.Problem != nil:
		p.noteCond(v1alpha1.ConditionCertificatesReady, false, hub.Problem.Reason, "IssueCertificates", hub.Problem.Message+"; agents keep using the CA already in namespace "+principalNS)
	case hub.Waiting != "":
		// Every certificate in use is valid and every agent still connects: the fleet stays
		// Ready while the new anchor rolls out, so routine rotations raise no alert.
		p.noteCond(v1alpha1.ConditionCertificatesReady, true, v1alpha1.ReasonWaitingForTrustRollout, "IssueCertificates", hub.Waiting)
	default:
		msg := fmt.Sprintf("CA, principal, resource-proxy and JWT secrets are in namespace %s (%s); %d agent cluster secret(s)", principalNS, p.setting, obs.Owned.Len())
		if hub.Notice != "" {
			msg += "; " + hub.Notice
			if c := meta.FindStatusCondition(goc.Status.Conditions, v1alpha1.ConditionCertificatesReady); c == nil || !strings.Contains(c.Message, hub.Notice) {
				p.event(corev1.EventTypeWarning, v1alpha1.ReasonWaitingForTrustRollout, "IssueCertificates", hub.Notice)
			}
		}
		p.setCond(v1alpha1.ConditionCertificatesReady, true, v1alpha1.ReasonCertificatesIssued, msg)
	}
	return nil
}

// addOn writes the OCM addon objects. The clusters the Argo CD components may go to are
// cleared first: the components' Placement selects only cleared clusters, so a cluster running
// them must carry its label before that Placement requires it (an upgrade keeps what runs).
func (p *pass) addOn(ctx context.Context) *stop {
	r, goc, obs := p.r, p.goc, p.obs
	if obs.Selected != nil {
		var err error
		if p.foreign, err = r.probes().ClearForComponents(ctx, goc, obs.Selected, obs.Invalid, obs.TeardownBlocked != ""); err != nil {
			return stopWith(err)
		}
	}
	// One GitOpsCluster per Placement writes its entry of the ClusterManagementAddOn (entries
	// are keyed by Placement): the oldest.
	placementOwner, err := ownership.PlacementOwner(ctx, r.Client, goc.Namespace, goc.Spec.PlacementRef.Name)
	if err != nil {
		return stopWith(err)
	}
	if placementOwner != nil && (placementOwner.Namespace != goc.Namespace || placementOwner.Name != goc.Name) {
		msg := fmt.Sprintf("Placement %s/%s is already used by the older GitOpsCluster %s/%s, which configures the agents of its clusters; point this GitOpsCluster at another Placement, or delete one of them",
			goc.Namespace, goc.Spec.PlacementRef.Name, placementOwner.Namespace, placementOwner.Name)
		p.noteCond(v1alpha1.ConditionAddOnConfigured, false, v1alpha1.ReasonPlacementInUse, "ApplyAddOn", msg)
		// Release whatever this GitOpsCluster applied before the other one came first.
		if err := r.addOns().ReleaseEntries(ctx, goc); err != nil {
			return stopWith(err)
		}
		return nil
	}
	if p.disc.Endpoint == nil {
		p.setCond(v1alpha1.ConditionAddOnConfigured, false, p.disc.Reason, "waiting for the principal endpoint: "+p.disc.Message)
		return nil
	}
	applied, err := r.addOns().Apply(ctx, goc, p.principalNS, p.disc.Endpoint, p.hub, obs.TrustedOwned())
	if err != nil {
		return p.fail(v1alpha1.ConditionAddOnConfigured, v1alpha1.ReasonAddOnApplyFailed, "ApplyAddOn", err)
	}
	p.emit(applied.Events)
	p.componentsWaiting = applied.ComponentsWaiting
	p.status.AddOnTemplate = applied.Template
	p.status.AddOnDeploymentConfig = applied.Config
	if obs.Selected != nil {
		if p.status.ExistingArgoCDClusters, err = r.addOns().Components().ExistingArgoCDClusters(ctx, goc, obs.Selected); err != nil {
			return stopWith(err)
		}
		p.emit(r.probes().ReportForeign(goc, p.status, p.foreign, p.setCond))
		if p.configRollout, err = r.addOns().PruneDeploymentConfigs(ctx, goc, applied.Config, sets.List(obs.Selected)); err != nil {
			return stopWith(err)
		}
	}
	mappingConflict := addonobjects.ApplicationMappingConflict(goc, p.principalNS, p.members)
	switch {
	case len(obs.Conflict) > 0:
		p.setCond(v1alpha1.ConditionAddOnConfigured, false, v1alpha1.ReasonClusterConflict,
			"clusters selected by more than one GitOpsCluster (one ManagedClusterAddOn can carry only one configuration): "+ownership.Summarize(obs.Conflict))
	case mappingConflict != "":
		p.noteCond(v1alpha1.ConditionAddOnConfigured, false, v1alpha1.ReasonApplicationMappingConflict, "ApplyAddOn", mappingConflict)
	default:
		msg := fmt.Sprintf("ClusterManagementAddOn %s lists Placement %s/%s with AddOnTemplate %s", r.Config.AddonName, goc.Namespace, goc.Spec.PlacementRef.Name, applied.Template)
		p.setCond(v1alpha1.ConditionAddOnConfigured, true, v1alpha1.ReasonAddOnApplied, msg+applied.ClusterConfigs.Notes())
	}
	return nil
}

// availability counts the available agents, and those a version change has not reached yet.
func (p *pass) availability(ctx context.Context) *stop {
	r, obs := p.r, p.obs
	if err := readiness.Agents(ctx, r.Client, r.Config.AddonName, obs, p.status, p.setCond); err != nil {
		return stopWith(err)
	}
	if obs.Selected != nil && r.Config.NamespaceManaged(p.principalNS) {
		want, err := r.principalImage(ctx, p.goc, p.principalNS)
		if err != nil {
			return stopWith(err)
		}
		if p.status.AgentsOnOtherVersion, err = readiness.AgentsOnOtherVersion(ctx, r.Client, r.Config.AddonName, p.goc, sets.List(obs.Selected), want); err != nil {
			return stopWith(err)
		}
		// OCM calls such an agent Available, as its pod runs, but the principal refuses it:
		// the fleet is not Ready until the version change has reached every cluster.
		if n := p.status.AgentsOnOtherVersion; n > 0 {
			msg := fmt.Sprintf("%d run another version than the principal's %s, which refuses them until OCM moves them to it (status.agentsOnOtherVersion)", n, want)
			if c := meta.FindStatusCondition(p.status.Conditions, v1alpha1.ConditionAgentsAvailable); c != nil && c.Status == metav1.ConditionFalse {
				msg = c.Message + "; " + msg
			} else {
				msg = fmt.Sprintf("%d of %d agent(s) available to OCM; ", p.status.AvailableAgents, obs.Selected.Len()) + msg
			}
			p.setCond(v1alpha1.ConditionAgentsAvailable, false, v1alpha1.ReasonAgentsUnavailable, msg)
		}
	}
	return nil
}

// summarize sets Ready from the conditions it stands for, with an Event when it changes.
func (p *pass) summarize() {
	notReady := readiness.NotReady(p.status.Conditions)
	ready := len(notReady) == 0
	wasReady := meta.IsStatusConditionTrue(p.goc.Status.Conditions, v1alpha1.ConditionReady)
	if ready {
		p.setCond(v1alpha1.ConditionReady, true, v1alpha1.ReasonReady, fmt.Sprintf("%d of %d agent(s) available", p.status.AvailableAgents, p.status.SelectedClusters))
		if !wasReady {
			p.event(corev1.EventTypeNormal, "Ready", "Reconcile", "the argocd-agent fleet is ready")
		}
		return
	}
	p.setCond(v1alpha1.ConditionReady, false, v1alpha1.ReasonNotReady, "not true yet: "+strings.Join(notReady, ", "))
	if wasReady {
		p.event(corev1.EventTypeWarning, "NotReady", "Reconcile", "the argocd-agent fleet is no longer ready: "+strings.Join(notReady, ", "))
	}
}

// requeue is when the next pass is due without an event: while the components wait for their
// Placement copy or a configuration rolls out, for a pending revocation, else at the next
// certificate renewal.
func (p *pass) requeue(ctx context.Context) ctrl.Result {
	switch {
	case p.componentsWaiting:
		return ctrl.Result{RequeueAfter: 5 * time.Second}
	case p.configRollout:
		// ManagedClusterAddOn config changes wake this reconcile; this is only a safety net.
		return ctrl.Result{RequeueAfter: 2 * time.Minute}
	case p.revocation.Requeue > 0:
		return ctrl.Result{RequeueAfter: p.revocation.Requeue}
	}
	next := p.hub.NextRenewal
	if !p.clusterRenewal.IsZero() && (next.IsZero() || p.clusterRenewal.Before(next)) {
		next = p.clusterRenewal
	}
	if next.IsZero() {
		return ctrl.Result{}
	}
	wait := next.Sub(p.r.Config.Now())
	if wait < time.Second {
		wait = time.Second
	}
	log.FromContext(ctx).V(1).Info("next certificate renewal", "after", wait)
	return ctrl.Result{RequeueAfter: wait}
}

// checkSignerExclusive reports in SignerExclusive whether OCM's addon-manager may read the hub
// CA in principalNS, with an Event when it turns so. Reported, not fixed: the grant is not this
// project's to remove. An unanswered check keeps the condition as it was.
func (p *pass) checkSignerExclusive(ctx context.Context) {
	r, principalNS := p.r, p.principalNS
	secret, known := r.signerCheck.CAReadableByOCM(ctx, r.Client, principalNS)
	if !known {
		return
	}
	if secret != "" {
		msg := fmt.Sprintf("OCM's addon-manager (%s) may read the hub CA secret %s/%s; with it, OCM signs any certificate request for this addon without the checks of this project's signer. Remove that grant", principalpki.OCMAddonManagerUser, principalNS, secret)
		p.noteCond(v1alpha1.ConditionSignerExclusive, false, v1alpha1.ReasonCAReadableByOCM, "CheckSigner", msg)
		return
	}
	p.setCond(v1alpha1.ConditionSignerExclusive, true, v1alpha1.ReasonCANotReadableByOCM,
		fmt.Sprintf("only this project's signer can sign agent certificates: OCM's addon-manager cannot read %s/%s (nor cert-manager's copy %s) and the template names no readable signing CA", principalNS, names.CASecretName, certmanager.CAIssuedSecretName))
}
