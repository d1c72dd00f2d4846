package gitopscluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

func excludes(p clusterv1beta1.ClusterPredicate) bool {
	for _, r := range p.RequiredClusterSelector.LabelSelector.MatchExpressions {
		if r.Key == v1alpha1.LabelArgoCDComponents && r.Operator == metav1.LabelSelectorOpNotIn && len(r.Values) == 1 && r.Values[0] == "Existing" {
			return true
		}
	}
	return false
}

func TestComponentsPlacementSpec(t *testing.T) {
	// No predicate selects every cluster of the bound sets: the copy gets one that excludes.
	all := &clusterv1beta1.Placement{}
	if spec := componentsPlacementSpec(all); spec == nil || len(spec.Predicates) != 1 || !excludes(spec.Predicates[0]) {
		t.Errorf("no predicates: %+v", spec)
	}
	// Predicates are ORed: each one excludes, and the user's object is not changed.
	two := &clusterv1beta1.Placement{Spec: clusterv1beta1.PlacementSpec{Predicates: []clusterv1beta1.ClusterPredicate{
		{RequiredClusterSelector: clusterv1beta1.ClusterSelector{LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "1"}}}},
		{RequiredClusterSelector: clusterv1beta1.ClusterSelector{ClaimSelector: clusterv1beta1.ClusterClaimSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpExists}}}}},
	}}}
	spec := componentsPlacementSpec(two)
	if spec == nil || len(spec.Predicates) != 2 || !excludes(spec.Predicates[0]) || !excludes(spec.Predicates[1]) {
		t.Errorf("two predicates: %+v", spec)
	} else if spec.Predicates[0].RequiredClusterSelector.LabelSelector.MatchLabels["a"] != "1" || len(spec.Predicates[1].RequiredClusterSelector.ClaimSelector.MatchExpressions) != 1 {
		t.Errorf("the user's selectors were not kept: %+v", spec.Predicates)
	}
	if excludes(two.Spec.Predicates[0]) || excludes(two.Spec.Predicates[1]) {
		t.Errorf("the user's Placement was changed")
	}
	// numberOfClusters: no copy.
	n := &clusterv1beta1.Placement{Spec: clusterv1beta1.PlacementSpec{NumberOfClusters: ptr.To[int32](3)}}
	if spec := componentsPlacementSpec(n); spec != nil {
		t.Errorf("numberOfClusters: a copy %+v", spec)
	}
}
