package gitopscluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// reconcileCount reads controller-runtime's own counter of finished GitOpsCluster reconciles.
func reconcileCount(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelIs(m, "controller", "gitopscluster") {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// TestIdleResyncWritesNothing restarts the manager over a settled fleet: the new manager
// reconciles every GitOpsCluster from scratch, and the API server must see no write at all.
func TestIdleResyncWritesNothing(t *testing.T) {
	ctx := context.Background()
	ns := "idle"
	createNamespace(t, ns)
	createManagedClusters(t, "id-1", "id-2", "id-3")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "id-1", "id-2", "id-3")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	for _, c := range []string{"id-1", "id-2", "id-3"} {
		setMCAAvailable(t, c, true)
	}
	conditionIs(t, ns, "fleet", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
	waitClusterSecrets(t, ns, "cluster-id-1", "cluster-id-2", "cluster-id-3")
	if _, err := testenv.QuietWrites(ctx, env.Config, 2*time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}

	var gocs v1alpha1.GitOpsClusterList
	if err := k8s.List(ctx, &gocs); err != nil {
		t.Fatal(err)
	}
	stopManager()
	before, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	start := reconcileCount(t)
	startManager()
	eventually(t, "every GitOpsCluster reconciled by the new manager", func() error {
		if got := reconcileCount(t) - start; got < float64(len(gocs.Items)) {
			return fmt.Errorf("%v of %d reconciled", got, len(gocs.Items))
		}
		return nil
	})
	// Until the writes have stopped for 2 s: a late write counts.
	after, err := testenv.QuietWrites(ctx, env.Config, 2*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if diff := testenv.DiffWrites(before, after); len(diff) > 0 {
		t.Errorf("an idle resync of %d GitOpsCluster(s) wrote to the API server: %v", len(gocs.Items), diff)
	}
}
