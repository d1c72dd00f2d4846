package gitopscluster

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// The components addon installs by a Placement of the manager's, a copy of the user's in which
// every predicate also requires the GitOpsCluster's clearance label (set by clearForComponents
// on the user's selected clusters that may get the components) and excludes clusters labelled
// LabelArgoCDComponents=Existing, which keep their own Argo CD. OCM then never creates the
// components' ManagedClusterAddOn on any other cluster, so nothing of Argo CD's is ever
// rendered there, not even for a moment when it joins (a template override set on the
// ManagedClusterAddOn after OCM created it would race OCM's first rendering). The agent's addon
// keeps the user's Placement.
//
// The clearance label is set only on clusters the user's Placement selects, so the copy needs
// no numberOfClusters (with it, the copy would pick the best N of fewer candidates and could
// take clusters the user's Placement did not).

// componentsPlacementSpec is the user's Placement restricted to the clusters cleared for the
// GitOpsCluster's components.
func componentsPlacementSpec(goc *v1alpha1.GitOpsCluster, pl *clusterv1beta1.Placement) *clusterv1beta1.PlacementSpec {
	spec := pl.Spec.DeepCopy()
	spec.NumberOfClusters = nil
	cleared := metav1.LabelSelectorRequirement{Key: names.ComponentsClearedLabel(goc), Operator: metav1.LabelSelectorOpExists}
	exclude := metav1.LabelSelectorRequirement{Key: v1alpha1.LabelArgoCDComponents, Operator: metav1.LabelSelectorOpNotIn,
		Values: []string{string(v1alpha1.ArgoCDComponentsExisting)}}
	if len(spec.Predicates) == 0 {
		spec.Predicates = []clusterv1beta1.ClusterPredicate{{}}
	}
	for i := range spec.Predicates {
		sel := &spec.Predicates[i].RequiredClusterSelector.LabelSelector
		sel.MatchExpressions = append(sel.MatchExpressions, cleared, exclude)
	}
	return spec
}

// applyComponentsPlacement writes the components' Placement and returns the name of the Placement
// the components addon installs by.
func (r *Reconciler) applyComponentsPlacement(ctx context.Context, goc *v1alpha1.GitOpsCluster) (string, error) {
	user := &clusterv1beta1.Placement{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: goc.Spec.PlacementRef.Name}, user); err != nil {
		if apierrors.IsNotFound(err) {
			// Nothing is selected; keep whatever there is until the Placement exists.
			return names.ComponentsPlacementName(goc), nil
		}
		return "", err
	}
	spec := componentsPlacementSpec(goc, user)
	pl := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: goc.Namespace, Name: names.ComponentsPlacementName(goc), Labels: ownerLabels(goc)}, Spec: *spec}
	if err := controllerutil.SetControllerReference(goc, pl, r.Client.Scheme()); err != nil {
		return "", err
	}
	live := &clusterv1beta1.Placement{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(pl), live)
	switch {
	case apierrors.IsNotFound(err):
		return pl.Name, r.Client.Create(ctx, pl)
	case err != nil:
		return "", err
	case !labelsContain(live.Labels, ownerLabels(goc)):
		return "", fmt.Errorf("the Placement %s/%s exists and is not this GitOpsCluster's; it is not overwritten", pl.Namespace, pl.Name)
	case equality.Semantic.DeepEqual(live.Spec, pl.Spec):
		return pl.Name, nil
	}
	live.Spec = pl.Spec
	return pl.Name, r.Client.Update(ctx, live)
}

func (r *Reconciler) deleteComponentsPlacement(ctx context.Context, goc *v1alpha1.GitOpsCluster) error {
	live := &clusterv1beta1.Placement{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: names.ComponentsPlacementName(goc)}, live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !labelsContain(live.Labels, ownerLabels(goc)) {
		return nil
	}
	pre := client.Preconditions{UID: &live.UID}
	return client.IgnoreNotFound(r.Client.Delete(ctx, live, pre))
}

// existingArgoCDClusters counts the selected clusters labelled to keep their own Argo CD, when
// the components addon's Placement leaves them out.
func (r *Reconciler) existingArgoCDClusters(ctx context.Context, goc *v1alpha1.GitOpsCluster, selected sets.Set[string]) (int32, error) {
	if !componentsWanted(goc) {
		return 0, nil
	}
	user := &clusterv1beta1.Placement{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: goc.Spec.PlacementRef.Name}, user); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	var labelled clusterv1.ManagedClusterList
	if err := r.Client.List(ctx, &labelled, client.MatchingLabels{v1alpha1.LabelArgoCDComponents: string(v1alpha1.ArgoCDComponentsExisting)}); err != nil {
		return 0, err
	}
	n := int32(0)
	for _, mc := range labelled.Items {
		if selected.Has(mc.Name) {
			n++
		}
	}
	return n, nil
}

// newComponentsAddOnCache caches the ManagedClusterAddOns of the components addon only; the
// manager's own cache holds those of the agent's addon (a field selector takes one name).
func newComponentsAddOnCache(mgr ctrl.Manager, addonName string) (cache.Cache, error) {
	return cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&addonv1alpha1.ManagedClusterAddOn{}: {Field: fields.OneTermEqualSelector("metadata.name", config.ComponentsAddonName(addonName))},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
}

// watchComponents adds the watches the components addon needs: its ManagedClusterAddOns (their
// rollout holds configs in use) and the opt-out label of ManagedClusters.
func (r *Reconciler) watchComponents(mgr ctrl.Manager, b *builder.Builder) (*builder.Builder, error) {
	if r.ComponentsAddOns == nil {
		c, err := newComponentsAddOnCache(mgr, r.Config.AddonName)
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(c); err != nil {
			return nil, err
		}
		r.ComponentsAddOns = c
	}
	return b.
		WatchesRawSource(source.Kind[client.Object](r.ComponentsAddOns, &addonv1alpha1.ManagedClusterAddOn{},
			handler.EnqueueRequestsFromMapFunc(r.forManagedClusterAddOn), predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false },
				UpdateFunc: func(e event.UpdateEvent) bool {
					o, n := e.ObjectOld.(*addonv1alpha1.ManagedClusterAddOn), e.ObjectNew.(*addonv1alpha1.ManagedClusterAddOn)
					return !equality.Semantic.DeepEqual(o.Status.ConfigReferences, n.Status.ConfigReferences)
				},
				DeleteFunc:  func(event.DeleteEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		// A new components addon of a cluster with its own Argo CD configuration must be
		// pointed at that cluster's template.
		WatchesRawSource(source.Kind[client.Object](r.ComponentsAddOns, &addonv1alpha1.ManagedClusterAddOn{},
			handler.EnqueueRequestsFromMapFunc(r.forClusterConfig), predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return true },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				DeleteFunc:  func(event.DeleteEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.forManagedCluster), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool { return e.Object.GetLabels()[v1alpha1.LabelArgoCDComponents] != "" },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetLabels()[v1alpha1.LabelArgoCDComponents] != e.ObjectNew.GetLabels()[v1alpha1.LabelArgoCDComponents]
			},
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})), nil
}

// forManagedCluster wakes the GitOpsClusters selecting the cluster, as forManagedClusterAddOn
// does for the cluster a ManagedClusterAddOn lives in.
func (r *Reconciler) forManagedCluster(ctx context.Context, o client.Object) []reconcile.Request {
	return r.forManagedClusterAddOn(ctx, &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetName()}})
}

// forClusterConfig wakes the GitOpsClusters that give the cluster of a ManagedClusterAddOn an
// Argo CD configuration of its own.
func (r *Reconciler) forClusterConfig(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha1.GitOpsClusterList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing GitOpsClusters for a new ManagedClusterAddOn", "cluster", o.GetNamespace())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		for _, e := range list.Items[i].Spec.ArgoCDAgentAddon.ClusterArgoCDConfig {
			if e.ClusterName == o.GetNamespace() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				break
			}
		}
	}
	return out
}
