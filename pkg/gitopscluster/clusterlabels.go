package gitopscluster

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/clusterlabels"
)

// IndexAgentSecretCluster indexes the project's agent cluster secrets by their agent (cluster)
// name, so a ManagedCluster's label change finds its secret without a pass over the fleet.
const IndexAgentSecretCluster = "argocd-agent-addon.agentSecretCluster"

// withClusterLabels adds the ManagedCluster's labels to a cluster secret about to be written, so
// that ApplicationSet cluster generators on the hub can fan out to agents by them. The
// ManagedCluster is read from the cache; a cluster not (yet) known gets none.
func (r *Reconciler) withClusterLabels(ctx context.Context, s *corev1.Secret, cluster string) error {
	mc := &clusterv1.ManagedCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading ManagedCluster %s: %w", cluster, err)
	}
	s.Labels, s.Annotations, _ = clusterlabels.Apply(s.Labels, s.Annotations, mc.Labels)
	return nil
}

// ClusterLabelSync follows a ManagedCluster's label changes onto its agent cluster secrets: one
// write per changed cluster, apart from the GitOpsCluster reconcile (which rewrites a secret
// only to renew it). Keyed by ManagedCluster name.
type ClusterLabelSync struct {
	Client client.Client
}

// SetupClusterLabelSync registers the index and the controller.
func SetupClusterLabelSync(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Secret{}, IndexAgentSecretCluster, func(o client.Object) []string {
		l := o.GetLabels()
		if l[LabelSecretType] != "cluster" || l[v1alpha1.LabelOwnerName] == "" || l[LabelAgentName] == "" {
			return nil
		}
		return []string{l[LabelAgentName]}
	}); err != nil {
		return fmt.Errorf("indexing agent cluster secrets: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("agent-cluster-labels").
		Watches(&clusterv1.ManagedCluster{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return !reflect.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
			},
		})).
		// A copied label edited or removed on the secret by hand is put back.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			l := o.GetLabels()
			if l[LabelSecretType] != "cluster" || l[v1alpha1.LabelOwnerName] == "" || l[LabelAgentName] == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: l[LabelAgentName]}}}
		}), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return !reflect.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
					e.ObjectOld.GetAnnotations()[clusterlabels.AnnotationCopied] != e.ObjectNew.GetAnnotations()[clusterlabels.AnnotationCopied]
			},
		})).
		Complete(&ClusterLabelSync{Client: mgr.GetClient()})
}

// Reconcile copies the cluster's current labels onto its agent cluster secrets.
func (s *ClusterLabelSync) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mc := &clusterv1.ManagedCluster{}
	if err := s.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var list corev1.SecretList
	if err := s.Client.List(ctx, &list, client.UnsafeDisableDeepCopy, client.MatchingFields{IndexAgentSecretCluster: mc.Name}); err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	for i := range list.Items {
		live := &list.Items[i]
		labels, annotations, changed := clusterlabels.Apply(live.Labels, live.Annotations, mc.Labels)
		if !changed {
			continue
		}
		u := live.DeepCopy()
		u.Labels, u.Annotations = labels, annotations
		if err := s.Client.Update(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("updating labels of %s/%s: %w", u.Namespace, u.Name, err))
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}
