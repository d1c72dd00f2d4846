package gitopscluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

func labelManagedCluster(t *testing.T, cluster, value string) {
	t.Helper()
	ctx := context.Background()
	mc := &clusterv1.ManagedCluster{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: cluster}, mc); err != nil {
		t.Fatal(err)
	}
	base := mc.DeepCopy()
	if mc.Labels == nil {
		mc.Labels = map[string]string{}
	}
	if value == "" {
		delete(mc.Labels, v1alpha1.LabelArgoCDComponents)
	} else {
		mc.Labels[v1alpha1.LabelArgoCDComponents] = value
	}
	if err := k8s.Patch(ctx, mc, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// createComponentsMCA stands in for OCM's addon-manager, which creates the components addon's
// ManagedClusterAddOn on every cluster of its placements.
func createComponentsMCA(t *testing.T, cluster string) {
	t.Helper()
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: componentsAddon}}
	if err := k8s.Create(context.Background(), mca); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func templateOverride(t *testing.T, cluster string) (string, error) {
	t.Helper()
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: cluster, Name: componentsAddon}, mca); err != nil {
		return "", err
	}
	for _, c := range mca.Spec.Configs {
		if c.Resource == "addontemplates" {
			return c.Name, nil
		}
	}
	return "", nil
}

// A cluster labelled to keep its own Argo CD gets, on its components ManagedClusterAddOn only,
// the template that installs nothing of Argo CD's; the label's removal gives it the components
// again; the agent's ManagedClusterAddOn is never written.
func TestClusterLabelKeepsItsOwnArgoCD(t *testing.T) {
	ctx := context.Background()
	ns := "optout"
	createNamespace(t, ns)
	createManagedClusters(t, "oo-own", "oo-new")
	labelManagedCluster(t, "oo-own", string(v1alpha1.ArgoCDComponentsExisting))
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "oo-own", "oo-new")
	for _, c := range []string{"oo-own", "oo-new"} {
		createComponentsMCA(t, c)
		managedClusterAddOn(t, c)
	}
	agentBefore := managedClusterAddOn(t, "oo-own").ResourceVersion
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	goc := getGOC(t, ns, "fleet")
	existing := names.ExistingArgoCDTemplateName(goc)

	eventually(t, "oo-own overridden, oo-new not", func() error {
		own, err := templateOverride(t, "oo-own")
		if err != nil || own != existing {
			return fmt.Errorf("oo-own template override %q (%v), want %q", own, err, existing)
		}
		if other, err := templateOverride(t, "oo-new"); err != nil || other != "" {
			return fmt.Errorf("oo-new template override %q (%v), want none", other, err)
		}
		if n := getGOC(t, ns, "fleet").Status.ExistingArgoCDClusters; n != 1 {
			return fmt.Errorf("existingArgoCDClusters = %d", n)
		}
		return nil
	})
	tpl := &addonv1alpha1.AddOnTemplate{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: existing}, tpl); err != nil {
		t.Fatal(err)
	}
	if got := manifestNames(t, tpl); !slices.Equal(got, []string{"ConfigMap/argocd-agent-addon-argocd"}) {
		t.Errorf("the template for clusters with their own Argo CD holds %v", got)
	}
	if after := managedClusterAddOn(t, "oo-own").ResourceVersion; after != agentBefore {
		t.Errorf("the agent's ManagedClusterAddOn was written")
	}

	labelManagedCluster(t, "oo-own", "")
	eventually(t, "oo-own back to the placement's components", func() error {
		if own, err := templateOverride(t, "oo-own"); err != nil || own != "" {
			return fmt.Errorf("oo-own template override %q (%v)", own, err)
		}
		if err := k8s.Get(ctx, types.NamespacedName{Name: existing}, &addonv1alpha1.AddOnTemplate{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the unused template is still there (%v)", err)
		}
		return nil
	})
}
