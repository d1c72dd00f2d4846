package addonobjects

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

var gocForSpec = &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "fleet"}}

// excludes reports whether a predicate keeps out the opted-out clusters and requires the
// GitOpsCluster's clearance label.
func excludes(p clusterv1beta1.ClusterPredicate) bool {
	optOut, cleared := false, false
	for _, r := range p.RequiredClusterSelector.LabelSelector.MatchExpressions {
		if r.Key == v1alpha1.LabelArgoCDComponents && r.Operator == metav1.LabelSelectorOpNotIn && len(r.Values) == 1 && r.Values[0] == "Existing" {
			optOut = true
		}
		if r.Key == names.ComponentsClearedLabel(gocForSpec) && r.Operator == metav1.LabelSelectorOpExists {
			cleared = true
		}
	}
	return optOut && cleared
}

func TestComponentsPlacementSpec(t *testing.T) {
	// No predicate selects every cluster of the bound sets: the copy gets one that excludes.
	all := &clusterv1beta1.Placement{}
	if spec := componentsPlacementSpec(gocForSpec, all); spec == nil || len(spec.Predicates) != 1 || !excludes(spec.Predicates[0]) {
		t.Errorf("no predicates: %+v", spec)
	}
	// Predicates are ORed: each one excludes, and the user's object is not changed.
	two := &clusterv1beta1.Placement{Spec: clusterv1beta1.PlacementSpec{Predicates: []clusterv1beta1.ClusterPredicate{
		{RequiredClusterSelector: clusterv1beta1.ClusterSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "1"}}}},
		{RequiredClusterSelector: clusterv1beta1.ClusterSelector{ClaimSelector: clusterv1beta1.ClusterClaimSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpExists}}}}},
	}}}
	spec := componentsPlacementSpec(gocForSpec, two)
	if spec == nil || len(spec.Predicates) != 2 || !excludes(spec.Predicates[0]) || !excludes(spec.Predicates[1]) {
		t.Errorf("two predicates: %+v", spec)
	} else if spec.Predicates[0].RequiredClusterSelector.LabelSelector.MatchLabels["a"] != "1" || len(spec.Predicates[1].RequiredClusterSelector.ClaimSelector.MatchExpressions) != 1 {
		t.Errorf("the user's selectors were not kept: %+v", spec.Predicates)
	}
	if excludes(two.Spec.Predicates[0]) || excludes(two.Spec.Predicates[1]) {
		t.Errorf("the user's Placement was changed")
	}
	// numberOfClusters: the clearance label is set only on the user's selected clusters, so the
	// copy takes all cleared ones; with numberOfClusters it could pick others.
	n := &clusterv1beta1.Placement{Spec: clusterv1beta1.PlacementSpec{NumberOfClusters: ptr.To[int32](3)}}
	if spec := componentsPlacementSpec(gocForSpec, n); spec.NumberOfClusters != nil || !excludes(spec.Predicates[0]) {
		t.Errorf("numberOfClusters: copy %+v", spec)
	}
}
