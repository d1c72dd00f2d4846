package revocation

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
)

// CertificateRecorder lets an agent cluster secret go only once its resource-proxy
// certificate is in the cluster's ledger on the principal. The reconcile writes a secret's
// current certificate nowhere else (one write per new cluster), so a secret deleted by hand
// would otherwise take with it the only record of a valid certificate.
type CertificateRecorder struct {
	Revoker
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
		cert, _ := agentsecret.Contents(s)
		revoked, err := r.onRecord(ctx, s.Namespace, cert.Fingerprint)
		if err != nil {
			return ctrl.Result{}, err
		}
		if cert.Fingerprint != "" && cert.NotAfter.After(now) && !revoked {
			owner := ledger.Owner{Namespace: s.Labels[v1alpha1.LabelOwnerNamespace], Name: s.Labels[v1alpha1.LabelOwnerName]}
			if err := r.Ledger(s.Namespace).Merge(ctx, cluster, owner, ledger.Entries{cert.Fingerprint: cert.NotAfter}, now); err != nil {
				return ctrl.Result{}, fmt.Errorf("recording the resource-proxy certificate of cluster secret %s/%s: %w", s.Namespace, s.Name, err)
			}
		}
	}
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(s, v1alpha1.FinalizerRecordCertificate)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, s, patch))
}

// onRecord reports whether fingerprint fp is on the revocation record of principal namespace
// ns, as the cache holds it. A record write the cache has yet to show costs at most a ledger
// that the next pass revokes again.
func (r *CertificateRecorder) onRecord(ctx context.Context, ns, fp string) (bool, error) {
	if !ledger.ValidFingerprint(fp) {
		return false, nil
	}
	shard := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ledger.ShardName(fp)}, shard); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	_, ok := shard.Data[fp]
	return ok, nil
}
