package gitopscluster_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// TestDeletingTheOwnerHandsItsClustersOver: a cluster two GitOpsClusters select belongs to the
// elder; when the elder is deleted, the younger registers the cluster at once, not at its next
// periodic pass.
func TestDeletingTheOwnerHandsItsClustersOver(t *testing.T) {
	ctx := context.Background()
	nsA, nsB := "handover-a", "handover-b"
	createNamespace(t, nsA)
	createNamespace(t, nsB)
	createManagedClusters(t, "ho-x")
	createPlacement(t, nsA, "pa")
	setDecisions(t, nsA, "pa", 1, "ho-x")
	createPlacement(t, nsB, "pb")
	setDecisions(t, nsB, "pb", 1, "ho-x")
	elder := createGitOpsCluster(t, nsA, "elder", "pa", withAddress("a.example.com"))
	time.Sleep(1100 * time.Millisecond) // distinct creation timestamps
	createGitOpsCluster(t, nsB, "younger", "pb", withAddress("b.example.com"))

	waitSecret(t, nsA, "cluster-ho-x")
	conditionIs(t, nsB, "younger", v1alpha1.ConditionAddOnConfigured, metav1.ConditionFalse, v1alpha1.ReasonClusterConflict)
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: nsB, Name: "cluster-ho-x"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the younger registered the elder's cluster: %v", err)
	}

	if err := k8s.Delete(ctx, elder); err != nil {
		t.Fatal(err)
	}
	// Well inside the reconciler's periodic safety nets (minutes).
	waitSecret(t, nsB, "cluster-ho-x")
	conditionIs(t, nsB, "younger", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")
}
