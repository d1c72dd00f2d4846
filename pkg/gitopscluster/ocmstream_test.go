package gitopscluster_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
)

// TestOCMRolloutWakesAPassPerSettle: OCM installing the addons across a fleet writes each
// cluster's ManagedClusterAddOns several times (the agent's created and then available, the
// components' created). That stream wakes the GitOpsCluster about once per OCMStatusSettle, not
// once per write, and the pass after the stream still sees its last write. Not parallel: a
// Placement or Node change of another test wakes every GitOpsCluster, this one's too.
func TestOCMRolloutWakesAPassPerSettle(t *testing.T) {
	const ns, n = "ocm-rollout", 12
	createNamespace(t, ns)
	var clusters []string
	for i := range n {
		clusters = append(clusters, fmt.Sprintf("rollout-%02d", i))
	}
	createManagedClusters(t, clusters...)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, clusters...)
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	secrets := make([]string, n)
	for i, c := range clusters {
		secrets[i] = "cluster-" + c
	}
	waitClusterSecrets(t, ns, secrets...)
	passes := func() int { return reconciles.get("gitopscluster", ns, "fleet") }
	waitSettled(t, passes, 2*gitopscluster.OCMStatusSettle)

	before, start := passes(), time.Now()
	for _, c := range clusters {
		createComponentsMCA(t, c)
		setMCAAvailable(t, c, true) // the agent's addon: created, then Available
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(start)
	g := conditionIs(t, ns, "fleet", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
	if g.Status.AvailableAgents != n {
		t.Errorf("available agents %d, want %d", g.Status.AvailableAgents, n)
	}
	waitSettled(t, passes, 2*gitopscluster.OCMStatusSettle)
	// One pass per settle over the stream, one more for a settle that began as it ended.
	got, limit := passes()-before, int(took/gitopscluster.OCMStatusSettle)+2
	t.Logf("%d writes of OCM over %s woke %d passes", 3*n, took.Round(time.Millisecond), got)
	if got > limit {
		t.Errorf("%d writes of OCM over %s woke %d passes, want at most %d", 3*n, took.Round(time.Millisecond), got, limit)
	}
}
