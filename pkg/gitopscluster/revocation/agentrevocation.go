package revocation

import (
	"context"
	"errors"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
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
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/recorder"
)

// Enforcer enforces AgentRevocations: on every principal namespace the manager serves,
// whichever GitOpsCluster owns the cluster there, for as long as the object exists. A
// compromised cluster's credentials are as dangerous to one principal as to another, and a
// cluster may label itself into another principal's Placement: so a revocation follows the
// cluster, and the cluster is re-admitted only once every AgentRevocation naming it is gone.
// It is the only place a revocation is lifted.
type Enforcer struct {
	config.Hub
}

// SetupWithManager registers the AgentRevocation controller. A cluster secret or a ledger
// that appears for a revoked cluster on any principal (a GitOpsCluster that had not seen the
// revocation yet, a certificate recorded meanwhile) wakes every revocation of the cluster,
// which removes it again.
func (r *Enforcer) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = recorder.For(mgr, names.EventReporter)
	}
	byCluster := func(cluster func(client.Object) string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			c := cluster(o)
			if c == "" {
				return nil
			}
			revs, err := r.revocationsOf(ctx, c)
			if err != nil {
				return nil
			}
			out := make([]reconcile.Request, 0, len(revs))
			for _, rev := range revs {
				out = append(out, reconcile.Request{NamespacedName: rev})
			}
			return out
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

// revocationsOf lists, from the cache, every AgentRevocation named cluster in a served
// namespace, lifted or not. They are few: one per incident and principal.
func (r *Enforcer) revocationsOf(ctx context.Context, cluster string) ([]types.NamespacedName, error) {
	var revs v1alpha1.AgentRevocationList
	if err := r.Client.List(ctx, &revs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []types.NamespacedName
	for i := range revs.Items {
		if revs.Items[i].Name == cluster && r.Config.NamespaceManaged(revs.Items[i].Namespace) {
			out = append(out, types.NamespacedName{Namespace: revs.Items[i].Namespace, Name: cluster})
		}
	}
	return out, nil
}

// Reconcile enforces one AgentRevocation, or lifts it once it is being deleted.
func (r *Enforcer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rev := &v1alpha1.AgentRevocation{}
	if err := r.Client.Get(ctx, req.NamespacedName, rev); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cluster, revNS := rev.Name, rev.Namespace
	if !rev.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.lift(ctx, rev)
	}
	if !r.Config.NamespaceManaged(revNS) {
		return ctrl.Result{}, r.setEnforced(ctx, rev, 0, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotManaged,
			fmt.Sprintf("namespace %s is not one of the manager's managed namespaces, so no principal here is served and nothing was revoked", revNS))
	}
	if !controllerutil.ContainsFinalizer(rev, v1alpha1.FinalizerRevocationLift) {
		patch := client.MergeFrom(rev.DeepCopy())
		controllerutil.AddFinalizer(rev, v1alpha1.FinalizerRevocationLift)
		if err := r.Client.Patch(ctx, rev, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	principals, before, blocked, err := r.enforce(ctx, revNS, cluster)
	if err != nil {
		_ = r.setEnforced(ctx, rev, blocked, metav1.ConditionFalse, v1alpha1.ReasonRevocationFailed, err.Error())
		return ctrl.Result{}, err
	}
	where := strings.Join(principals, ", ")
	if blocked > before || !meta.IsStatusConditionTrue(rev.Status.Conditions, v1alpha1.ConditionEnforced) {
		r.Recorder.Eventf(rev, nil, corev1.EventTypeWarning, "AgentRevoked", "RevokeAgent",
			"cluster %s is revoked on every principal (it had records on the principals in %s): no cluster secret, %d certificate(s) blocked", cluster, where, blocked)
	}
	return ctrl.Result{}, r.setEnforced(ctx, rev, blocked, metav1.ConditionTrue, v1alpha1.ReasonRevocationEnforced,
		fmt.Sprintf("cluster %s has no cluster secret on any principal and its %d unexpired certificate(s) recorded on the principals in %s are blocked there; the signer refuses its requests for every principal. "+
			"Deleting this object re-admits the cluster with a new key once no other AgentRevocation names it; the blocked certificates stay blocked until they expire", cluster, blocked, where))
}

// principalsOf reads, from the cache, what the served principals know of cluster: the
// namespaces holding its cluster secrets or ledgers (to enforce on; revNS, the revocation's
// own, always among them), those whose revocation record names it too (to count on), and how
// many of its unexpired certificates those records hold.
func (r *Enforcer) principalsOf(ctx context.Context, revNS, cluster string) (records, known sets.Set[string], secrets []*corev1.Secret, blocked int, _ error) {
	records = sets.New(revNS)
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelAgentName: cluster}); err != nil {
		return nil, nil, nil, 0, err
	}
	for i := range list.Items {
		if r.Config.NamespaceManaged(list.Items[i].Namespace) {
			records.Insert(list.Items[i].Namespace)
			secrets = append(secrets, &list.Items[i])
		}
	}
	var ledgers corev1.ConfigMapList
	if err := r.Client.List(ctx, &ledgers, client.UnsafeDisableDeepCopy, client.MatchingLabels{ledger.LabelRecord: ledger.RecordLedger, ledger.LabelCluster: cluster}); err != nil {
		return nil, nil, nil, 0, err
	}
	for i := range ledgers.Items {
		if r.Config.NamespaceManaged(ledgers.Items[i].Namespace) {
			records.Insert(ledgers.Items[i].Namespace)
		}
	}
	known = records.Clone()
	var shards corev1.ConfigMapList
	if err := r.Client.List(ctx, &shards, client.UnsafeDisableDeepCopy, client.MatchingLabels{ledger.LabelRecord: ledger.RecordRevoked}); err != nil {
		return nil, nil, nil, 0, err
	}
	now := r.Config.Now()
	for i := range shards.Items {
		ns := shards.Items[i].Namespace
		if !r.Config.NamespaceManaged(ns) {
			continue
		}
		for _, v := range shards.Items[i].Data {
			if _, c := ledger.RevokedCauseAndCluster(v); c == cluster && !ledger.RevokedExpired(v, now) {
				known.Insert(ns)
				blocked++
			}
		}
	}
	return records, known, secrets, blocked, nil
}

// enforce blocks every certificate recorded for cluster on each principal that knows it and
// deletes its cluster secrets there, whichever GitOpsCluster wrote them. It returns those
// principals and how many of the cluster's certificates their revocation records held before
// (as cached) and after (read live, so that the status counts what this pass blocked).
func (r *Enforcer) enforce(ctx context.Context, revNS, cluster string) (principals []string, before, after int, err error) {
	records, known, secrets, before, err := r.principalsOf(ctx, revNS, cluster)
	if err != nil {
		return nil, 0, 0, err
	}
	principals = sets.List(known)
	// As in revokeCluster: record, unregister, then block, so that unregistration never waits
	// for room in the blocklist.
	now := r.Config.Now()
	var errs []error
	for _, s := range secrets {
		owner := ledger.Owner{Namespace: s.Labels[v1alpha1.LabelOwnerNamespace], Name: s.Labels[v1alpha1.LabelOwnerName]}
		if err := retireSecret(ctx, r.Client, LedgerStore(r.Hub, s.Namespace), cluster, owner, s, now); err != nil {
			errs = append(errs, fmt.Errorf("unregistering revoked cluster %s: %w", cluster, err))
		}
	}
	for _, ns := range sets.List(records) {
		if _, err := LedgerStore(r.Hub, ns).Revoke(ctx, cluster, ledger.CauseRevoked, nil, now); err != nil {
			errs = append(errs, fmt.Errorf("blocking the certificates of cluster %s on the principal in %s: %w", cluster, ns, err))
		}
	}
	after, err = r.blockedOn(ctx, principals, cluster)
	return principals, before, after, errors.Join(append(errs, err)...)
}

// blockedOn counts cluster's entries in the revocation records of the principals in
// namespaces, live.
func (r *Enforcer) blockedOn(ctx context.Context, namespaces []string, cluster string) (int, error) {
	n := 0
	for _, ns := range namespaces {
		revoked, err := LedgerStore(r.Hub, ns).Revoked(ctx, r.Config.Now())
		if err != nil {
			return n, err
		}
		for _, c := range revoked {
			if c.Cluster == cluster {
				n++
			}
		}
	}
	return n, nil
}

// lift lets go of a revocation a person deleted. Nothing is unblocked: as with X.509's
// keyCompromise, a key that was revoked stays revoked until its certificate expires. Another
// AgentRevocation of the same cluster, on any principal, still holds: only when none is left
// are the requests the signer refused deleted, so that OCM's registration agent, which makes a
// new key for every request, asks again.
func (r *Enforcer) lift(ctx context.Context, rev *v1alpha1.AgentRevocation) error {
	if !controllerutil.ContainsFinalizer(rev, v1alpha1.FinalizerRevocationLift) {
		return nil
	}
	others, err := r.otherRevocations(ctx, rev)
	if err != nil {
		return err
	}
	if len(others) == 0 {
		if err := r.deleteRevokedCSRs(ctx, rev.Name); err != nil {
			return err
		}
	}
	log.FromContext(ctx).Info("revocation lifted", "cluster", rev.Name, "principalNamespace", rev.Namespace, "stillRevokedBy", others)
	// The count is for the Event only: the cache's is close enough.
	_, _, _, blocked, err := r.principalsOf(ctx, rev.Namespace, rev.Name)
	if err != nil {
		return err
	}
	if len(others) > 0 {
		r.Recorder.Eventf(rev, nil, corev1.EventTypeNormal, "RevocationLifted", "LiftRevocation",
			"this revocation of cluster %s is lifted, but the cluster stays revoked on every principal by AgentRevocation %s", rev.Name, strings.Join(others, ", "))
	} else {
		r.Recorder.Eventf(rev, nil, corev1.EventTypeNormal, "RevocationLifted", "LiftRevocation",
			"the revocation of cluster %s is lifted: its agent is re-admitted with a new key, and its %d certificate(s) blocked under the revocation stay blocked until they expire",
			rev.Name, blocked)
	}
	patch := client.MergeFrom(rev.DeepCopy())
	controllerutil.RemoveFinalizer(rev, v1alpha1.FinalizerRevocationLift)
	return client.IgnoreNotFound(r.Client.Patch(ctx, rev, patch))
}

// otherRevocations lists, live, the AgentRevocations of rev's cluster in served namespaces
// that still hold (not rev, none being deleted). A read that fails keeps the lift waiting.
func (r *Enforcer) otherRevocations(ctx context.Context, rev *v1alpha1.AgentRevocation) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("AgentRevocationList"))
	if err := r.Reader.List(ctx, list, client.MatchingFields{"metadata.name": rev.Name}); err != nil {
		return nil, fmt.Errorf("reading the other AgentRevocations of cluster %s: %w", rev.Name, err)
	}
	var out []string
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name != rev.Name || o.Namespace == rev.Namespace || !o.DeletionTimestamp.IsZero() || !r.Config.NamespaceManaged(o.Namespace) {
			continue
		}
		out = append(out, o.Namespace+"/"+o.Name)
	}
	return out, nil
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

// deleteRevokedCSRs deletes the requests of cluster that the signer failed as Revoked. OCM's
// registration agent (v1.2.1) keeps waiting on a request its hub approved, Failed or not, and
// asks anew only once that request is gone; kube-controller-manager's cleaner deletes it only
// after an hour.
func (r *Enforcer) deleteRevokedCSRs(ctx context.Context, cluster string) error {
	var csrs certificatesv1.CertificateSigningRequestList
	if err := r.Client.List(ctx, &csrs, client.MatchingLabels{names.CSRClusterNameLabel: cluster, names.CSRAddonNameLabel: r.Config.AddonName}); err != nil {
		return err
	}
	for i := range csrs.Items {
		csr := &csrs.Items[i]
		if csr.Spec.SignerName != r.Config.SignerName {
			continue
		}
		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateFailed && c.Reason == names.ReasonCSRRevoked {
				if err := r.Client.Delete(ctx, csr); client.IgnoreNotFound(err) != nil {
					return fmt.Errorf("deleting the revoked certificate request %s of cluster %s: %w", csr.Name, cluster, err)
				}
				break
			}
		}
	}
	return nil
}
