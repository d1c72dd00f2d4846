package v1alpha1_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	reportv1alpha1 "github.com/argocd-agent-addon/argocd-agent-addon/apis/appsetreport/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// upstreamReport is a MulticlusterApplicationSetReport as tools written for the upstream
// report read and write it (counts as strings, per-cluster conditions).
const upstreamReport = `
apiVersion: apps.open-cluster-management.io/v1alpha1
kind: MulticlusterApplicationSetReport
metadata: {name: guestbook, namespace: reports}
statuses:
  resources:
  - {apiVersion: apps/v1, kind: Deployment, name: guestbook-ui, namespace: guestbook}
  clusterConditions:
  - cluster: cluster1
    app: argocd/cluster1-guestbook
    syncStatus: Synced
    healthStatus: Healthy
    operationStateStartedAt: "2026-01-01T00:00:00Z"
    operationStatePhase: Succeeded
    syncRevision: 0123456789abcdef
  - cluster: cluster2
    syncStatus: OutOfSync
    healthStatus: Degraded
    conditions:
    - {type: SyncError, message: one or more objects failed to apply}
  summary: {clusters: "2", synced: "1", notSynced: "1", healthy: "1", notHealthy: "1", inProgress: "0"}
`

// TestReportCRDAcceptsTheUpstreamShape: the generated CRD stores the upstream report shape
// unchanged, and the Go types read it.
func TestReportCRDAcceptsTheUpstreamShape(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true})
	ctx := context.Background()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports"}}); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(upstreamReport), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, u); err != nil {
		t.Fatalf("the CRD refuses the upstream shape: %v", err)
	}
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(u.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(u), stored); err != nil {
		t.Fatal(err)
	}
	want, _, _ := unstructured.NestedMap(u.Object, "statuses")
	got, _, _ := unstructured.NestedMap(stored.Object, "statuses")
	wb, _ := yaml.Marshal(want)
	gb, _ := yaml.Marshal(got)
	if string(wb) != string(gb) {
		t.Errorf("stored statuses differ (pruned fields?):\nwant %s\ngot  %s", wb, gb)
	}
	typed := &reportv1alpha1.MulticlusterApplicationSetReport{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(u), typed); err != nil {
		t.Fatal(err)
	}
	s := typed.Statuses
	if s.Summary.Clusters != "2" || len(s.ClusterConditions) != 2 || s.ClusterConditions[1].Conditions[0].Type != "SyncError" || s.Resources[0].Kind != "Deployment" {
		t.Errorf("typed read: %+v", s)
	}
}
