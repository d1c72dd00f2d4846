package gitopscluster_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/clustersecrets"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// A cluster joining writes the GitOpsCluster's status once. The pass its own cluster-secret
// write wakes would otherwise read the GitOpsCluster from a cache that has not yet seen the
// status write before it, and send a status write the API server refuses (a conflict, counted
// as a request, logged as a reconcile error, and a whole pass over the fleet for nothing).
// A join writes no Event: the registration is counted by a metric instead.
func TestJoinWritesStatusOnce(t *testing.T) {
	ctx := context.Background()
	ns := "join-once"
	createNamespace(t, ns)
	createManagedClusters(t, "jo-1", "jo-2", "jo-3", "jo-4")
	for _, c := range []string{"jo-1", "jo-2", "jo-3", "jo-4"} {
		setMCAAvailable(t, c, true)
	}
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 0, "jo-1")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
	waitClusterSecrets(t, ns, "cluster-jo-1")

	joined := []string{"jo-1"}
	for _, c := range []string{"jo-2", "jo-3", "jo-4"} {
		before, err := testenv.QuietWrites(ctx, env.Config, 2*time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		registered := registeredAgents(t)
		joined = append(joined, c)
		setDecisions(t, ns, "p", 0, joined...)
		var want []string
		for _, j := range joined {
			want = append(want, "cluster-"+j)
		}
		waitClusterSecrets(t, ns, want...)
		after, err := testenv.QuietWrites(ctx, env.Config, 2*time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		diff := testenv.DiffWrites(before, after)
		if diff["gitopsclusters/status"] != 1 || diff["secrets"] != 1 {
			t.Errorf("%s joining: %v API writes, want one status write and one secret (the refused ones count too)", c, diff)
		}
		if diff["events"] != 0 {
			t.Errorf("%s joining: %v API writes, want no Event", c, diff)
		}
		if got := registeredAgents(t); got != registered+1 {
			t.Errorf("%s joining: %s went from %v to %v, want one more", c, clustersecrets.MetricAgentsRegistered, registered, got)
		}
	}
}

// registeredAgents reads the manager's count of agents registered with their principal.
func registeredAgents(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == clustersecrets.MetricAgentsRegistered {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", clustersecrets.MetricAgentsRegistered)
	return 0
}
