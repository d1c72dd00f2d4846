package addonobjects

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// The components addon installs by a Placement of the manager's, a copy of the user's in which
// every predicate also requires the GitOpsCluster's clearance label (set by ClearForComponents
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
func (comp Components) applyComponentsPlacement(ctx context.Context, goc *v1alpha1.GitOpsCluster) (string, error) {
	user := &clusterv1beta1.Placement{}
	if err := comp.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: goc.Spec.PlacementRef.Name}, user); err != nil {
		if apierrors.IsNotFound(err) {
			// Nothing is selected; keep whatever there is until the Placement exists.
			return names.ComponentsPlacementName(goc), nil
		}
		return "", err
	}
	spec := componentsPlacementSpec(goc, user)
	pl := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: goc.Namespace, Name: names.ComponentsPlacementName(goc), Labels: names.OwnerLabels(goc)}, Spec: *spec}
	if err := controllerutil.SetControllerReference(goc, pl, comp.Client.Scheme()); err != nil {
		return "", err
	}
	live := &clusterv1beta1.Placement{}
	err := comp.Client.Get(ctx, client.ObjectKeyFromObject(pl), live)
	switch {
	case apierrors.IsNotFound(err):
		return pl.Name, comp.Client.Create(ctx, pl)
	case err != nil:
		return "", err
	case !names.HasLabels(live.Labels, names.OwnerLabels(goc)):
		return "", fmt.Errorf("the Placement %s/%s exists and is not this GitOpsCluster's; it is not overwritten", pl.Namespace, pl.Name)
	case equality.Semantic.DeepEqual(live.Spec, pl.Spec):
		return pl.Name, nil
	}
	live.Spec = pl.Spec
	return pl.Name, comp.Client.Update(ctx, live)
}

// DeleteComponentsPlacement deletes the components' Placement if this GitOpsCluster owns it.
func (comp Components) DeleteComponentsPlacement(ctx context.Context, goc *v1alpha1.GitOpsCluster) error {
	live := &clusterv1beta1.Placement{}
	if err := comp.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: names.ComponentsPlacementName(goc)}, live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !names.HasLabels(live.Labels, names.OwnerLabels(goc)) {
		return nil
	}
	pre := client.Preconditions{UID: &live.UID}
	return client.IgnoreNotFound(comp.Client.Delete(ctx, live, pre))
}

// ExistingArgoCDClusters counts the selected clusters labelled to keep their own Argo CD, when
// the components addon's Placement leaves them out.
func (comp Components) ExistingArgoCDClusters(ctx context.Context, goc *v1alpha1.GitOpsCluster, selected sets.Set[string]) (int32, error) {
	if !componentsWanted(goc) {
		return 0, nil
	}
	user := &clusterv1beta1.Placement{}
	if err := comp.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: goc.Spec.PlacementRef.Name}, user); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	var labelled clusterv1.ManagedClusterList
	if err := comp.Client.List(ctx, &labelled, client.MatchingLabels{v1alpha1.LabelArgoCDComponents: string(v1alpha1.ArgoCDComponentsExisting)}); err != nil {
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
