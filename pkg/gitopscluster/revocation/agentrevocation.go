package revocation

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/selection"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/recorder"
)

// Enforcer enforces AgentRevocations: per principal, whichever GitOpsCluster owns
// the cluster, for as long as the object exists. It is the only place a revocation is lifted.
type Enforcer struct {
	Revoker
}

// SetupWithManager registers the AgentRevocation controller. A cluster secret or a ledger
// that appears for a revoked cluster (a GitOpsCluster that had not seen the revocation yet, a
// certificate recorded meanwhile) wakes its revocation, which removes it again.
func (r *Enforcer) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = recorder.For(mgr, names.EventReporter)
	}
	byCluster := func(cluster func(client.Object) string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if c := cluster(o); c != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: c}}}
			}
			return nil
		})
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("agentrevocation").
		For(&v1alpha1.AgentRevocation{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&corev1.Secret{}, byCluster(func(o client.Object) string {
			if o.GetLabels()[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
				return ""
			}
			return o.GetLabels()[v1alpha1.LabelAgentName]
		})).
		Watches(&corev1.ConfigMap{}, byCluster(func(o client.Object) string {
			if cm, ok := o.(*corev1.ConfigMap); ok {
				return ledger.ClusterOf(cm)
			}
			return ""
		})).
		Complete(r)
}

// Reconcile enforces one AgentRevocation, or lifts it once it is being deleted.
func (r *Enforcer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rev := &v1alpha1.AgentRevocation{}
	if err := r.Client.Get(ctx, req.NamespacedName, rev); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cluster, principalNS := rev.Name, rev.Namespace
	if !rev.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.lift(ctx, rev)
	}
	if !r.Config.NamespaceManaged(principalNS) {
		return ctrl.Result{}, r.setEnforced(ctx, rev, 0, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotManaged,
			fmt.Sprintf("namespace %s is not one of the manager's managed namespaces, so no principal here is served and nothing was revoked", principalNS))
	}
	if !controllerutil.ContainsFinalizer(rev, v1alpha1.FinalizerRevocationLift) {
		patch := client.MergeFrom(rev.DeepCopy())
		controllerutil.AddFinalizer(rev, v1alpha1.FinalizerRevocationLift)
		if err := r.Client.Patch(ctx, rev, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	before, blocked, err := r.enforce(ctx, principalNS, cluster)
	if err != nil {
		_ = r.setEnforced(ctx, rev, blocked, metav1.ConditionFalse, v1alpha1.ReasonRevocationFailed, err.Error())
		return ctrl.Result{}, err
	}
	if blocked > before || !meta.IsStatusConditionTrue(rev.Status.Conditions, v1alpha1.ConditionEnforced) {
		r.Recorder.Eventf(rev, nil, corev1.EventTypeWarning, "AgentRevoked", "RevokeAgent",
			"cluster %s is revoked on the principal in %s: no cluster secret, %d certificate(s) blocked", cluster, principalNS, blocked)
	}
	return ctrl.Result{}, r.setEnforced(ctx, rev, blocked, metav1.ConditionTrue, v1alpha1.ReasonRevocationEnforced,
		fmt.Sprintf("cluster %s has no cluster secret on the principal and its %d unexpired certificate(s) are blocked; the signer refuses its requests. "+
			"Deleting this object re-admits the cluster with a new key; the blocked certificates stay blocked until they expire", cluster, blocked))
}

// enforce blocks every certificate recorded for cluster on the principal and deletes its
// cluster secrets there, whichever GitOpsCluster wrote them. It returns how many of the
// cluster's certificates were blocked before and after.
func (r *Enforcer) enforce(ctx context.Context, principalNS, cluster string) (before, after int, err error) {
	before, err = r.blockedOf(ctx, principalNS, cluster)
	if err != nil {
		return 0, 0, err
	}
	var secrets corev1.SecretList
	if err := r.Client.List(ctx, &secrets, client.InNamespace(principalNS), client.MatchingLabels{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelAgentName: cluster,
	}); err != nil {
		return before, before, err
	}
	// As in revokeCluster: record, unregister, then block, so that unregistration never waits
	// for room in the blocklist.
	store := r.Ledger(principalNS)
	now := r.Config.Now()
	var errs []error
	for i := range secrets.Items {
		s := &secrets.Items[i]
		if cert, _ := agentsecret.Contents(s); cert.Fingerprint != "" {
			owner := ledger.Owner{Namespace: s.Labels[v1alpha1.LabelOwnerNamespace], Name: s.Labels[v1alpha1.LabelOwnerName]}
			if err := store.Merge(ctx, cluster, owner, ledger.Entries{cert.Fingerprint: cert.NotAfter}, now); err != nil {
				return before, before, fmt.Errorf("recording the cluster secret's certificate of %s: %w", cluster, err)
			}
		}
		if err := r.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting the cluster secret %s of revoked cluster %s: %w", s.Name, cluster, err))
		}
	}
	if _, err := store.Revoke(ctx, cluster, ledger.CauseRevoked, nil, now); err != nil {
		errs = append(errs, fmt.Errorf("blocking the certificates of cluster %s: %w", cluster, err))
	}
	after, err = r.blockedOf(ctx, principalNS, cluster)
	return before, after, errors.Join(append(errs, err)...)
}

// blockedOf counts cluster's entries in the principal's revocation record, live.
func (r *Enforcer) blockedOf(ctx context.Context, principalNS, cluster string) (int, error) {
	revoked, err := r.Ledger(principalNS).Revoked(ctx, r.Config.Now())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range revoked {
		if c.Cluster == cluster {
			n++
		}
	}
	return n, nil
}

// lift re-admits a cluster whose revocation a person deleted. Nothing is unblocked: as with
// X.509's keyCompromise, a key that was revoked stays revoked until its certificate expires.
// OCM's registration agent makes a new key for every request, and asks again once the
// request the signer refused is gone.
func (r *Enforcer) lift(ctx context.Context, rev *v1alpha1.AgentRevocation) error {
	if !controllerutil.ContainsFinalizer(rev, v1alpha1.FinalizerRevocationLift) {
		return nil
	}
	if err := r.deleteRevokedCSRs(ctx, rev.Name); err != nil {
		return err
	}
	log.FromContext(ctx).Info("revocation lifted", "cluster", rev.Name, "principalNamespace", rev.Namespace)
	blocked, err := r.blockedOf(ctx, rev.Namespace, rev.Name)
	if err != nil {
		return err
	}
	r.Recorder.Eventf(rev, nil, corev1.EventTypeNormal, "RevocationLifted", "LiftRevocation",
		"the revocation of cluster %s on the principal in %s is lifted: its agent is re-admitted with a new key, and its %d certificate(s) blocked under the revocation stay blocked until they expire",
		rev.Name, rev.Namespace, blocked)
	patch := client.MergeFrom(rev.DeepCopy())
	controllerutil.RemoveFinalizer(rev, v1alpha1.FinalizerRevocationLift)
	return client.IgnoreNotFound(r.Client.Patch(ctx, rev, patch))
}

func (r *Enforcer) setEnforced(ctx context.Context, rev *v1alpha1.AgentRevocation, blocked int, status metav1.ConditionStatus, reason, message string) error {
	patch := client.MergeFrom(rev.DeepCopy())
	changed := meta.SetStatusCondition(&rev.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionEnforced, Status: status, Reason: reason, Message: message, ObservedGeneration: rev.Generation,
	})
	if rev.Status.BlockedCertificates != int32(blocked) || rev.Status.ObservedGeneration != rev.Generation {
		rev.Status.BlockedCertificates = int32(blocked)
		rev.Status.ObservedGeneration = rev.Generation
		changed = true
	}
	if !changed {
		return nil
	}
	return client.IgnoreNotFound(r.Client.Status().Patch(ctx, rev, patch))
}

// requestRevocations makes the AgentRevocation of every cluster goc lists in
// spec.revokedClusters and owns (or has records for) on its principal, so that the revocation
// outlives the list: editing the list, re-creating the GitOpsCluster or another GitOpsCluster
// taking the cluster over never lifts it. A GitOpsCluster cannot revoke a cluster it does not
// own, nor one whose ledger has no live owner.
func (v *Revoker) requestRevocations(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string, obs *selection.Observation, rec Records) error {
	var errs []error
	for _, c := range sets.List(sets.New(goc.Spec.RevokedClusters...).Difference(rec.Revocations)) {
		// Only a cluster this GitOpsCluster owns, or has registered: an ownerless ledger (a
		// cluster that left another GitOpsCluster) belongs to nobody's list.
		_, hasSecret := rec.Secrets[c]
		owner, hasLedger := rec.Ledgers[c]
		ownLedger := hasLedger && owner == ledger.Owner{Namespace: goc.Namespace, Name: goc.Name}
		if !obs.Owned.Has(c) && !hasSecret && !ownLedger {
			continue
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
			v.Event(goc, corev1.EventTypeWarning, "AgentRevocationRequested", "RevokeAgent",
				"cluster %s is listed in spec.revokedClusters: created AgentRevocation %s/%s, which holds until a person deletes it", c, principalNS, c)
		case apierrors.IsAlreadyExists(err):
		default:
			errs = append(errs, fmt.Errorf("creating the AgentRevocation of cluster %s: %w", c, err))
		}
	}
	return errors.Join(errs...)
}
