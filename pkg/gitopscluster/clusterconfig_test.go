package gitopscluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// TestClusterArgoCDConfig: a cluster's own Argo CD configuration gets a components template of
// its own (the GitOpsCluster's keys with the cluster's on top), named in that cluster's
// components ManagedClusterAddOn, including one OCM creates later; a hub admin's configs there
// are kept and an AddOnTemplate the admin named is not overwritten; an entry for a cluster not
// selected is reported; removing an entry gives the cluster the GitOpsCluster's template back.
func TestClusterArgoCDConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "cluster-config"
	createNamespace(t, ns)
	createManagedClusters(t, "cc-1", "cc-2", "cc-3")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "cc-1", "cc-2", "cc-3")
	// A hub admin's own configs on two clusters' components addon.
	adminADC := addonv1alpha1.AddOnConfig{ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: "addondeploymentconfigs"},
		ConfigReferent: addonv1alpha1.ConfigReferent{Namespace: "cc-2", Name: "admin-settings"}}
	adminTemplate := addonv1alpha1.AddOnConfig{ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: "addontemplates"},
		ConfigReferent: addonv1alpha1.ConfigReferent{Name: "admin-template"}}
	createComponentsMCAWith(t, "cc-2", adminADC)
	createComponentsMCAWith(t, "cc-3", adminTemplate)
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.ArgoCDConfig = &v1alpha1.ArgoCDConfig{ArgoCDCM: map[string]string{"timeout.reconciliation": "90s", "a": "fleet"}}
		g.Spec.ArgoCDAgentAddon.ClusterArgoCDConfig = []v1alpha1.ClusterArgoCDConfig{
			{ClusterName: "cc-1", ArgoCDConfig: v1alpha1.ArgoCDConfig{ArgoCDCM: map[string]string{"a": "one"}}},
			{ClusterName: "cc-2", ArgoCDConfig: v1alpha1.ArgoCDConfig{ArgoCDCM: map[string]string{"a": "two"}}},
			{ClusterName: "cc-3", ArgoCDConfig: v1alpha1.ArgoCDConfig{ArgoCDCM: map[string]string{"a": "three"}}},
			{ClusterName: "cc-9", ArgoCDConfig: v1alpha1.ArgoCDConfig{ArgoCDCM: map[string]string{"a": "nine"}}},
		}
	})
	goc := getGOC(t, ns, "fleet")
	argoCDCM := func(template string) (map[string]string, error) {
		tpl := &addonv1alpha1.AddOnTemplate{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: template}, tpl); err != nil {
			return nil, err
		}
		for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
			o := &unstructured.Unstructured{}
			if err := o.UnmarshalJSON(m.Raw); err != nil {
				return nil, err
			}
			if o.GetKind() == "ConfigMap" && o.GetName() == "argocd-cm" {
				d, _, _ := unstructured.NestedStringMap(o.Object, "data")
				return d, nil
			}
		}
		return nil, fmt.Errorf("no argocd-cm in %s", template)
	}
	configs := func(cluster string) ([]addonv1alpha1.AddOnConfig, error) {
		mca := &addonv1alpha1.ManagedClusterAddOn{}
		err := k8s.Get(ctx, types.NamespacedName{Namespace: cluster, Name: componentsAddon}, mca)
		return mca.Spec.Configs, err
	}
	one := names.ComponentsClusterTemplateName(goc, "cc-1")
	two := names.ComponentsClusterTemplateName(goc, "cc-2")
	eventually(t, "each cluster's template, with the GitOpsCluster's keys under the cluster's", func() error {
		for tpl, want := range map[string]string{one: "one", two: "two", names.ComponentsTemplateName(goc): "fleet"} {
			d, err := argoCDCM(tpl)
			if err != nil {
				return err
			}
			if d["a"] != want || d["timeout.reconciliation"] != "90s" {
				return fmt.Errorf("%s: argocd-cm %v", tpl, d)
			}
		}
		return nil
	})
	eventually(t, "cc-2's addon names its template beside the admin's config", func() error {
		c, err := configs("cc-2")
		if err != nil {
			return err
		}
		if len(c) != 2 || c[0] != adminADC || c[1].Resource != "addontemplates" || c[1].Name != two {
			return fmt.Errorf("configs %+v", c)
		}
		return nil
	})
	g := conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, "True", v1alpha1.ReasonAddOnApplied)
	if c := findCond(g, v1alpha1.ConditionAddOnConfigured); !strings.Contains(c.Message, "cc-9") || !strings.Contains(c.Message, "cc-3") {
		t.Errorf("the condition does not name the unselected cluster and the one an admin holds: %s", c.Message)
	}
	if c, err := configs("cc-3"); err != nil || len(c) != 1 || c[0] != adminTemplate {
		t.Errorf("the admin's AddOnTemplate on cc-3 was overwritten: %+v (%v)", c, err)
	}

	// OCM creates cc-1's addon after the GitOpsCluster is configured.
	createComponentsMCA(t, "cc-1")
	eventually(t, "cc-1's new addon names its template", func() error {
		c, err := configs("cc-1")
		if err != nil {
			return err
		}
		if len(c) != 1 || c[0].Name != one {
			return fmt.Errorf("configs %+v", c)
		}
		return nil
	})

	// cc-1's entry removed: the default template again, the cluster's template gone.
	g = getGOC(t, ns, "fleet")
	base := g.DeepCopy()
	g.Spec.ArgoCDAgentAddon.ClusterArgoCDConfig = g.Spec.ArgoCDAgentAddon.ClusterArgoCDConfig[1:]
	if err := k8s.Patch(ctx, g, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "cc-1 back on the GitOpsCluster's template", func() error {
		c, err := configs("cc-1")
		if err != nil {
			return err
		}
		if len(c) != 0 {
			return fmt.Errorf("configs %+v", c)
		}
		if err := k8s.Get(ctx, types.NamespacedName{Name: one}, &addonv1alpha1.AddOnTemplate{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("template %s still there (%v)", one, err)
		}
		return nil
	})
	if c, err := configs("cc-2"); err != nil || len(c) != 2 || c[1].Name != two {
		t.Errorf("cc-2's configs changed: %+v (%v)", c, err)
	}
}

// createComponentsMCAWith creates the components addon's ManagedClusterAddOn with configs a hub
// admin set.
func createComponentsMCAWith(t *testing.T, cluster string, configs ...addonv1alpha1.AddOnConfig) {
	t.Helper()
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	mca.Namespace, mca.Name = cluster, componentsAddon
	mca.Spec.Configs = configs
	if err := k8s.Create(context.Background(), mca); err != nil {
		t.Fatal(err)
	}
}
