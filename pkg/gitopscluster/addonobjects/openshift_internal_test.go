package addonobjects

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// TestOpenShiftPlacementSelectsByTheProductClaim: OCM's reserved product claim, the OpenShift
// products, the user's cluster sets, and every taint tolerated.
func TestOpenShiftPlacementSelectsByTheProductClaim(t *testing.T) {
	if !slices.Contains(clusterv1alpha1.ReservedClusterClaimNames[:], productClaim) {
		t.Fatalf("%s is not one of OCM's reserved claims %v", productClaim, clusterv1alpha1.ReservedClusterClaimNames)
	}
	spec := openShiftPlacementSpec(&clusterv1beta1.Placement{Spec: clusterv1beta1.PlacementSpec{ClusterSets: []string{"prod"}}})
	if !slices.Equal(spec.ClusterSets, []string{"prod"}) || spec.NumberOfClusters != nil {
		t.Errorf("cluster sets %v, numberOfClusters %v", spec.ClusterSets, spec.NumberOfClusters)
	}
	if len(spec.Predicates) != 1 {
		t.Fatalf("predicates %+v", spec.Predicates)
	}
	sel := spec.Predicates[0].RequiredClusterSelector
	want := []metav1.LabelSelectorRequirement{{Key: productClaim, Operator: metav1.LabelSelectorOpIn, Values: openShiftProducts}}
	if len(sel.LabelSelector.MatchExpressions)+len(sel.LabelSelector.MatchLabels)+len(sel.CelSelector.CelExpressions) != 0 ||
		len(sel.ClaimSelector.MatchExpressions) != 1 || sel.ClaimSelector.MatchExpressions[0].Key != want[0].Key ||
		sel.ClaimSelector.MatchExpressions[0].Operator != want[0].Operator || !slices.Equal(sel.ClaimSelector.MatchExpressions[0].Values, want[0].Values) {
		t.Errorf("selector %+v", sel)
	}
	if !slices.Contains(openShiftProducts, "OpenShift") {
		t.Errorf("products %v", openShiftProducts)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "" || spec.Tolerations[0].Operator != clusterv1beta1.TolerationOpExists || spec.Tolerations[0].TolerationSeconds != nil {
		t.Errorf("tolerations %+v", spec.Tolerations)
	}
}

func TestOpenShiftNamesFit(t *testing.T) {
	for _, n := range []int{5, 240, 253} {
		goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: strings.Repeat("a", n)}}
		for _, name := range []string{OpenShiftPlacementName(goc), AssignedTemplateName(goc)} {
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				t.Errorf("%q: %v", name, errs)
			}
		}
	}
	a := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: strings.Repeat("x", 250)}}
	b := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: strings.Repeat("x", 250)}}
	if OpenShiftPlacementName(a) == OpenShiftPlacementName(b) || AssignedTemplateName(a) == AssignedTemplateName(b) {
		t.Error("two GitOpsClusters share a cut name")
	}
}
