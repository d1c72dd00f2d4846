package gitopscluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// TestTwoGitOpsClustersOnOnePlacement: the CMA entry is keyed by Placement, so two
// GitOpsClusters naming the same Placement would overwrite each other's configuration on every
// reconcile. The older one owns the Placement; the younger reports PlacementInUse and writes
// nothing; deleting the younger leaves the older's entry in place.
func TestTwoGitOpsClustersOnOnePlacement(t *testing.T) {
	ctx := context.Background()
	const ns = "shared-placement"
	createNamespace(t, ns)
	createManagedClusters(t, "sp-a", "sp-b")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 0, "sp-a", "sp-b")
	createGitOpsCluster(t, ns, "first", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "first", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")
	time.Sleep(1100 * time.Millisecond) // distinct creation timestamps make "first" the elder
	createGitOpsCluster(t, ns, "second", "p", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.Mode = v1alpha1.AgentModeAutonomous
	})
	g := conditionIs(t, ns, "second", v1alpha1.ConditionAddOnConfigured, metav1.ConditionFalse, v1alpha1.ReasonPlacementInUse)
	if msg := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionAddOnConfigured).Message; !strings.Contains(msg, ns+"/first") {
		t.Errorf("PlacementInUse does not name the owner: %s", msg)
	}
	first := conditionIs(t, ns, "first", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")

	// The entry is the elder's, and stays so: no write to the CMA for a while.
	cmaRV := func() string {
		cma := &addonv1alpha1.ClusterManagementAddOn{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: addonName}, cma); err != nil {
			t.Fatal(err)
		}
		return cma.ResourceVersion
	}
	checkEntry := func() error {
		e, ok := cmaEntries(t)[ns+"/p"]
		if !ok {
			return fmt.Errorf("no CMA entry for %s/p", ns)
		}
		for _, c := range e.Configs {
			if c.Resource == "addontemplates" && c.Name != first.Status.AddOnTemplate {
				return fmt.Errorf("the entry names template %s, want the elder's %s", c.Name, first.Status.AddOnTemplate)
			}
		}
		return nil
	}
	eventually(t, "the elder's entry", checkEntry)
	before := cmaRV()
	time.Sleep(3 * time.Second)
	if after := cmaRV(); after != before {
		t.Errorf("the CMA kept changing (resourceVersion %s -> %s): the two GitOpsClusters still fight over the entry", before, after)
	}

	if err := k8s.Delete(ctx, &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "second is gone", func() error {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "second"}, &v1alpha1.GitOpsCluster{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	time.Sleep(time.Second)
	if err := checkEntry(); err != nil {
		t.Errorf("after deleting the younger GitOpsCluster: %v", err)
	}
}

// TestTemplateNamesOfTenantsDoNotCollide: team-a/prod and team/a-prod once shared one
// AddOnTemplate; each now has its own, and a template another GitOpsCluster owns is never
// overwritten.
func TestTemplateNamesOfTenantsDoNotCollide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	createNamespace(t, "team-a")
	createNamespace(t, "team")
	createManagedClusters(t, "tn-a", "tn-b")
	createPlacement(t, "team-a", "prod-p")
	setDecisions(t, "team-a", "prod-p", 0, "tn-a")
	createPlacement(t, "team", "a-prod-p")
	setDecisions(t, "team", "a-prod-p", 0, "tn-b")
	createGitOpsCluster(t, "team-a", "prod", "prod-p", withAddress("a.example.com"))
	createGitOpsCluster(t, "team", "a-prod", "a-prod-p", withAddress("b.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.Mode = v1alpha1.AgentModeAutonomous
	})
	a := conditionIs(t, "team-a", "prod", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")
	b := conditionIs(t, "team", "a-prod", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")
	if a.Status.AddOnTemplate == b.Status.AddOnTemplate {
		t.Fatalf("both GitOpsClusters use AddOnTemplate %s", a.Status.AddOnTemplate)
	}

	// A template of the name a new GitOpsCluster would use, owned by someone else.
	squatter := &addonv1alpha1.AddOnTemplate{ObjectMeta: metav1.ObjectMeta{Name: "argocd-agent-team.squat", Labels: map[string]string{
		v1alpha1.LabelOwnerNamespace: "elsewhere", v1alpha1.LabelOwnerName: "other"}},
		Spec: addonv1alpha1.AddOnTemplateSpec{AddonName: addonName}}
	if err := k8s.Create(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	createPlacement(t, "team", "squat-p")
	createGitOpsCluster(t, "team", "squat", "squat-p", withAddress("c.example.com"))
	g := conditionIs(t, "team", "squat", v1alpha1.ConditionAddOnConfigured, metav1.ConditionFalse, v1alpha1.ReasonAddOnApplyFailed)
	if msg := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionAddOnConfigured).Message; !strings.Contains(msg, "elsewhere/other") {
		t.Errorf("the condition does not name the template's owner: %s", msg)
	}
	live := &addonv1alpha1.AddOnTemplate{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: squatter.Name}, live); err != nil {
		t.Fatal(err)
	}
	if live.Labels[v1alpha1.LabelOwnerName] != "other" || len(live.Spec.AgentSpec.Workload.Manifests) != 0 {
		t.Error("another GitOpsCluster's AddOnTemplate was overwritten")
	}
}
