package propagation

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

// ReconcileProjectWork runs one pass of the project controller over the ManifestWork of
// AppProject project on cluster.
func (r *Reconciler) ReconcileProjectWork(ctx context.Context, cluster, project string) (ctrl.Result, error) {
	return (&projectReconciler{r: r}).Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: cluster, Name: project}})
}
