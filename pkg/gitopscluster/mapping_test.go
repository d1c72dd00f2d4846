package gitopscluster_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

func withMapping(m v1alpha1.ApplicationMapping) func(*v1alpha1.GitOpsCluster) {
	return func(g *v1alpha1.GitOpsCluster) { g.Spec.ArgoCDAgentAddon.ApplicationMapping = m }
}

// A principal routes all its managed Applications one way: a younger managed GitOpsCluster of
// the same principal that asks for another applicationMapping is told so (its agents are still
// configured), and agreeing again clears it without touching the younger one.
func TestApplicationMappingConflictOnOnePrincipal(t *testing.T) {
	ctx := context.Background()
	ns := "mapping-conflict"
	createNamespace(t, ns)
	createPlacement(t, ns, "p1")
	createPlacement(t, ns, "p2")
	createGitOpsCluster(t, ns, "a-destination", "p1", withAddress("principal.example.com"), withMapping(v1alpha1.ApplicationMappingDestination))
	conditionIs(t, ns, "a-destination", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)

	b := createGitOpsCluster(t, ns, "b-namespace", "p2", withAddress("principal.example.com"))
	conditionIs(t, ns, "b-namespace", v1alpha1.ConditionAddOnConfigured, metav1.ConditionFalse, v1alpha1.ReasonApplicationMappingConflict)
	conditionIs(t, ns, "a-destination", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)
	if err := k8s.Get(ctx, types.NamespacedName{Name: names.TemplateName(b)}, &addonv1alpha1.AddOnTemplate{}); err != nil {
		t.Errorf("the younger GitOpsCluster's agents must still be configured: %v", err)
	}

	// The older one changes its mind; the younger one is woken by that change alone.
	a := getGOC(t, ns, "a-destination")
	a.Spec.ArgoCDAgentAddon.ApplicationMapping = v1alpha1.ApplicationMappingNamespace
	if err := k8s.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	conditionIs(t, ns, "b-namespace", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)
}
