package clusterlabels

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
)

// Sync follows one ManagedCluster's label changes onto the cluster secrets written for it: a
// label change costs one write per such secret, whatever the fleet size. Keyed by ManagedCluster
// name.
type Sync struct {
	Client client.Client
	Lookup Lookup
	// ClusterOf returns the ManagedCluster a Secret was written for ("" for none).
	ClusterOf func(client.Object) string
}

// Lookup says how Sync finds a cluster's secrets in the cache.
type Lookup struct {
	// Index, when set, is a field index of Secrets by the ManagedCluster they were written for,
	// registered by SetupSync; for secrets whose labels cannot always name the cluster.
	Index string
	// Label, used when Index is empty, is a label whose value is the ManagedCluster's name.
	// It needs no index: an index holds two entries per secret, which at thousands of
	// clusters weighs more than a scan of the cached secrets on a cluster's label change.
	Label string
}

// SetupSync registers the index (when lookup names one) and a Sync controller named name.
// clusterOf returns the ManagedCluster a Secret was written for, "" for Secrets that are not to
// follow any.
func SetupSync(ctx context.Context, mgr ctrl.Manager, name string, lookup Lookup, clusterOf func(client.Object) string) error {
	if lookup.Index != "" {
		if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Secret{}, lookup.Index, func(o client.Object) []string {
			if c := clusterOf(o); c != "" {
				return []string{c}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("indexing cluster secrets for %s: %w", name, err)
		}
	} else if lookup.Label == "" {
		return fmt.Errorf("cluster label sync %s: neither an index nor a label finds the secrets", name)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		Watches(&clusterv1.ManagedCluster{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(labelsChanged())).
		// A copied label edited or removed on the secret by hand is put back.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if c := clusterOf(o); c != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: c}}}
			}
			return nil
		}), builder.WithPredicates(labelsChanged())).
		Complete(&Sync{Client: mgr.GetClient(), Lookup: lookup, ClusterOf: clusterOf})
}

// Reconcile copies the cluster's current labels onto its secrets.
func (s *Sync) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mc := &clusterv1.ManagedCluster{}
	if err := s.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		// A cluster that is gone leaves its Placements; their owners remove its secrets.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var list corev1.SecretList
	match := client.ListOption(client.MatchingLabels{s.Lookup.Label: mc.Name})
	if s.Lookup.Index != "" {
		match = client.MatchingFields{s.Lookup.Index: mc.Name}
	}
	if err := s.Client.List(ctx, &list, client.UnsafeDisableDeepCopy, match); err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	for i := range list.Items {
		live := &list.Items[i]
		if s.ClusterOf(live) != mc.Name {
			continue
		}
		labels, annotations, changed := Apply(live.Labels, live.Annotations, mc.Labels)
		if !changed {
			continue
		}
		// A patch of the metadata alone: the cached copy may not hold the secret's whole data
		// (the manager's cache keeps agent cluster secrets in a compact form).
		u := live.DeepCopy()
		u.Labels, u.Annotations = labels, annotations
		if err := s.Client.Patch(ctx, u, client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("updating labels of %s/%s: %w", u.Namespace, u.Name, err))
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// labelsChanged passes only updates that change an object's labels or the copied-labels record.
func labelsChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !reflect.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
				e.ObjectOld.GetAnnotations()[AnnotationCopied] != e.ObjectNew.GetAnnotations()[AnnotationCopied]
		},
	}
}
