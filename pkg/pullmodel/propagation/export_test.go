package propagation

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ReconcileProjectWork runs one pass of the project controller over the ManifestWork of
// AppProject project on cluster.
func (r *Reconciler) ReconcileProjectWork(ctx context.Context, cluster, project string) (ctrl.Result, error) {
	return (&projectReconciler{r: r}).Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: cluster, Name: project}})
}

// ProjectKeysOfNamespace is what an event of a ManagedClusterSetBinding in namespace wakes of
// the project ManifestWorks: the project keys of every Application there.
func (r *Reconciler) ProjectKeysOfNamespace(ctx context.Context, namespace string) []reconcile.Request {
	return r.projectKeysFor(ctx, r.apps(ctx, client.InNamespace(namespace)))
}

// Apply is the write a reconcile makes of a ManifestWork it has as have and wants as want.
func (r *Reconciler) Apply(ctx context.Context, have, want *workv1.ManifestWork) (bool, error) {
	return r.apply(ctx, have, want)
}
