package revocation

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
)

// CertificateRecorder lets an agent cluster secret go only once its resource-proxy
// certificate is in the cluster's ledger on the principal. The reconcile writes a secret's
// current certificate nowhere else (one write per new cluster), so a secret deleted by hand
// would otherwise take with it the only record of a valid certificate.
type CertificateRecorder struct {
	config.Hub
}

// SetupWithManager registers the controller.
func (r *CertificateRecorder) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("clustersecret-certificate").
		For(&corev1.Secret{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return !o.GetDeletionTimestamp().IsZero() && controllerutil.ContainsFinalizer(o, v1alpha1.FinalizerRecordCertificate)
		}))).
		Complete(r)
}

// Reconcile records the certificate of a cluster secret being deleted and removes the finalizer.
// A certificate already on the revocation record is not recorded again: the revocation that
// unregistered the secret recorded and blocked it, and deleted the ledger, and a new ledger
// would outlive every GitOpsCluster that could revoke it.
func (r *CertificateRecorder) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &corev1.Secret{}
	if err := r.Client.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if s.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(s, v1alpha1.FinalizerRecordCertificate) {
		return ctrl.Result{}, nil
	}
	now := r.Config.Now()
	if cluster := s.Labels[v1alpha1.LabelAgentName]; cluster != "" {
		if cert, _ := agentsecret.Contents(s); cert.Fingerprint != "" && cert.NotAfter.After(now) {
			store := LedgerStore(r.Hub, s.Namespace)
			revoked, err := store.OnRecord(ctx, cert.Fingerprint)
			if err != nil {
				return ctrl.Result{}, err
			}
			if revoked {
				return r.release(ctx, s)
			}
			owner := ledger.Owner{Namespace: s.Labels[v1alpha1.LabelOwnerNamespace], Name: s.Labels[v1alpha1.LabelOwnerName]}
			if err := store.Merge(ctx, cluster, owner, ledger.Entries{cert.Fingerprint: cert.NotAfter}, now); err != nil {
				return ctrl.Result{}, fmt.Errorf("recording the resource-proxy certificate of cluster secret %s/%s: %w", s.Namespace, s.Name, err)
			}
		}
	}
	return r.release(ctx, s)
}

// release removes the finalizer, letting the secret go.
func (r *CertificateRecorder) release(ctx context.Context, s *corev1.Secret) (ctrl.Result, error) {
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(s, v1alpha1.FinalizerRecordCertificate)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, s, patch))
}
