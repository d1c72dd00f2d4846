package clusters

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/clusterlabels"
)

// LabelSync follows one ManagedCluster's label changes onto the registration secrets of that
// cluster only: a label change costs one write per registration naming the cluster, whatever
// the fleet size.
type LabelSync struct {
	Client client.Client
}

// Reconcile is keyed by ManagedCluster name.
func (s *LabelSync) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mc := &clusterv1.ManagedCluster{}
	if err := s.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		// A cluster that is gone leaves its Placements; the registrations remove its secrets.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var list corev1.SecretList
	if err := s.Client.List(ctx, &list, client.UnsafeDisableDeepCopy, client.MatchingFields{IndexCluster: mc.Name}); err != nil {
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
