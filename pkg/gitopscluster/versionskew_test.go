package gitopscluster_test

import (
	"context"
	"fmt"
	"testing"

	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

func setMCALastApplied(t *testing.T, cluster, ns, adcName string) {
	t.Helper()
	mca := managedClusterAddOn(t, cluster)
	spec := &addonv1alpha1.ConfigSpecHash{ConfigReferent: addonv1alpha1.ConfigReferent{Namespace: ns, Name: adcName}, SpecHash: "test"}
	ref := addonv1alpha1.ConfigReference{
		ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: "addon.open-cluster-management.io", Resource: "addondeploymentconfigs"},
		ConfigReferent:      spec.ConfigReferent,
		DesiredConfig:       spec,
		LastAppliedConfig:   spec.DeepCopy(),
	}
	mca.Status.ConfigReferences = []addonv1alpha1.ConfigReference{ref}
	if err := k8s.Status().Update(context.Background(), mca); err != nil {
		t.Fatal(err)
	}
}

func waitOtherVersion(t *testing.T, ns, name string, want int32) {
	t.Helper()
	eventually(t, fmt.Sprintf("agentsOnOtherVersion = %d", want), func() error {
		if got := getGOC(t, ns, name).Status.AgentsOnOtherVersion; got != want {
			return fmt.Errorf("agentsOnOtherVersion = %d", got)
		}
		return nil
	})
}

// A version change shows as the number of agents still on the old version until OCM reports
// each cluster on the new config.
func TestAgentsOnOtherVersionDuringAVersionChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "version-skew"
	createNamespace(t, ns)
	createManagedClusters(t, "vs-1", "vs-2")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "vs-1", "vs-2")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.Image = "quay.io/argoprojlabs/argocd-agent:v0.9.0"
	})
	var oldADC string
	eventually(t, "a config", func() error {
		if oldADC = getGOC(t, ns, "fleet").Status.AddOnDeploymentConfig; oldADC == "" {
			return fmt.Errorf("no config yet")
		}
		return nil
	})
	for _, c := range []string{"vs-1", "vs-2"} {
		setMCALastApplied(t, c, ns, oldADC)
	}
	waitOtherVersion(t, ns, "fleet", 0)

	g := getGOC(t, ns, "fleet")
	base := g.DeepCopy()
	g.Spec.ArgoCDAgentAddon.Image = "quay.io/argoprojlabs/argocd-agent:v0.9.1"
	if err := k8s.Patch(ctx, g, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	var newADC string
	eventually(t, "a new config", func() error {
		if newADC = getGOC(t, ns, "fleet").Status.AddOnDeploymentConfig; newADC == oldADC {
			return fmt.Errorf("config still %s", newADC)
		}
		return nil
	})
	waitOtherVersion(t, ns, "fleet", 2)
	setMCALastApplied(t, "vs-1", ns, newADC)
	waitOtherVersion(t, ns, "fleet", 1)
	setMCALastApplied(t, "vs-2", ns, newADC)
	waitOtherVersion(t, ns, "fleet", 0)
}
