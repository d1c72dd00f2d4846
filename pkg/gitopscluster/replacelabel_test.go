package gitopscluster_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// TestReplaceChosenPerCluster: with existingArgoCD LeaveAlone, a cluster running an Argo CD the
// addon did not install gets the components once a hub admin labels its ManagedCluster
// argocd-components=Replace, and is no longer reported as left alone; another such cluster
// still is, and gets nothing. Removing the label leaves the components where they run (one
// label edit must not uninstall them).
func TestReplaceChosenPerCluster(t *testing.T) {
	t.Parallel()
	const ns = "replace-per-cluster"
	createNamespace(t, ns)
	createManagedClusters(t, "rp-take", "rp-keep")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "rp-take", "rp-keep")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	goc := getGOC(t, ns, "fleet")
	key := names.ComponentsClearedLabel(goc)
	foreign := []probeObject{{present: true, image: "quay.io/argoproj/argocd:v3.6.1"}, {present: true, image: "quay.io/argoproj/argocd:v3.6.1"}, {present: true}, {present: true}}
	reportProbe(t, "rp-take", goc, foreign...)
	reportProbe(t, "rp-keep", goc, foreign...)
	eventually(t, "both reported as left alone", func() error {
		if g := getGOC(t, ns, "fleet"); g.Status.ForeignArgoCDClusters != 2 {
			return fmt.Errorf("foreign %d %+v", g.Status.ForeignArgoCDClusters, g.Status.ForeignArgoCD)
		}
		return nil
	})

	labelManagedCluster(t, "rp-take", v1alpha1.LabelValueReplace)
	eventually(t, "rp-take cleared, rp-keep not", func() error {
		for c, want := range map[string]bool{"rp-take": true, "rp-keep": false} {
			if _, got := clusterLabels(t, c)[key]; got != want {
				return fmt.Errorf("%s cleared = %v, want %v", c, got, want)
			}
		}
		return nil
	})
	eventually(t, "only rp-keep reported as left alone", func() error {
		g := getGOC(t, ns, "fleet")
		if g.Status.ForeignArgoCDClusters != 1 || len(g.Status.ForeignArgoCD) != 1 || g.Status.ForeignArgoCD[0].Cluster != "rp-keep" {
			return fmt.Errorf("foreign %d %+v", g.Status.ForeignArgoCDClusters, g.Status.ForeignArgoCD)
		}
		return nil
	})
	conditionIs(t, ns, "fleet", v1alpha1.ConditionForeignArgoCD, metav1.ConditionTrue, v1alpha1.ReasonForeignArgoCDLeftAlone)

	labelManagedCluster(t, "rp-take", "")
	eventually(t, "rp-take reported again", func() error {
		if g := getGOC(t, ns, "fleet"); g.Status.ForeignArgoCDClusters != 2 {
			return fmt.Errorf("foreign %d", g.Status.ForeignArgoCDClusters)
		}
		return nil
	})
	if _, ok := clusterLabels(t, "rp-take")[key]; !ok {
		t.Fatal("removing the Replace label took rp-take's clearance away: its components would be uninstalled")
	}
}
