package gitopscluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// twoSelectors makes an elder and a younger GitOpsCluster select the same cluster and waits
// until the elder registered it and the younger reports the conflict.
func twoSelectors(t *testing.T, nsA, nsB, cluster string) *v1alpha1.GitOpsCluster {
	t.Helper()
	createNamespace(t, nsA)
	createNamespace(t, nsB)
	createManagedClusters(t, cluster)
	createPlacement(t, nsA, "pa")
	setDecisions(t, nsA, "pa", 1, cluster)
	createPlacement(t, nsB, "pb")
	setDecisions(t, nsB, "pb", 1, cluster)
	elder := createGitOpsCluster(t, nsA, "elder", "pa", withAddress("a.example.com"))
	time.Sleep(1100 * time.Millisecond) // distinct creation timestamps
	createGitOpsCluster(t, nsB, "younger", "pb", withAddress("b.example.com"))

	waitSecret(t, nsA, "cluster-"+cluster)
	conditionIs(t, nsB, "younger", v1alpha1.ConditionAddOnConfigured, metav1.ConditionFalse, v1alpha1.ReasonClusterConflict)
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: nsB, Name: "cluster-" + cluster}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the younger registered the elder's cluster: %v", err)
	}
	return elder
}

// TestDeletingTheOwnerHandsItsClustersOver: a cluster two GitOpsClusters select belongs to the
// elder; when the elder is deleted, the younger registers the cluster at once, not at its next
// periodic pass. Several events wake it here; the next test pins the one meant for it.
func TestDeletingTheOwnerHandsItsClustersOver(t *testing.T) {
	nsA, nsB := "handover-a", "handover-b"
	elder := twoSelectors(t, nsA, nsB, "ho-x")
	if err := k8s.Delete(context.Background(), elder); err != nil {
		t.Fatal(err)
	}
	// Well inside the reconciler's periodic safety nets (minutes).
	waitSecret(t, nsB, "cluster-ho-x")
	conditionIs(t, nsB, "younger", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")
}

// TestOwnerMarkedForDeletionWakesTheYounger: the mark of deletion alone hands the cluster over.
// The elder's cleanup writes (its addon entries, secrets) would wake the younger too, so here
// the elder has no cleanup to do: another controller's finalizer instead of the manager's holds
// it, and the mark of deletion is the only event the younger can hear.
func TestOwnerMarkedForDeletionWakesTheYounger(t *testing.T) {
	ctx := context.Background()
	nsA, nsB := "handover-mark-a", "handover-mark-b"
	const hold = "example.com/hold"
	elder := twoSelectors(t, nsA, nsB, "hm-x")
	t.Cleanup(func() { rebuildAndDelete(t, elder) })

	// The finalizer change itself wakes no reconcile of the elder, but another event may, and
	// the manager puts its finalizer back: delete only the version seen with the foreign one alone.
	eventually(t, "the elder marked for deletion with only the foreign finalizer", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(elder), elder); err != nil {
			return err
		}
		if !slices.Equal(elder.Finalizers, []string{hold}) {
			patch := client.MergeFromWithOptions(elder.DeepCopy(), client.MergeFromWithOptimisticLock{})
			elder.Finalizers = []string{hold}
			if err := k8s.Patch(ctx, elder, patch); err != nil {
				return err
			}
			time.Sleep(500 * time.Millisecond)
			return fmt.Errorf("finalizers set to %s; looking again", hold)
		}
		return k8s.Delete(ctx, elder, client.Preconditions{ResourceVersion: &elder.ResourceVersion})
	})
	waitSecret(t, nsB, "cluster-hm-x")
	conditionIs(t, nsB, "younger", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")
}

// rebuildAndDelete lets a GitOpsCluster held by a foreign finalizer go, then creates it again and
// deletes it with the manager's cleanup, so that what it left behind does not outlive the test.
func rebuildAndDelete(t *testing.T, goc *v1alpha1.GitOpsCluster) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKeyFromObject(goc)
	live := &v1alpha1.GitOpsCluster{}
	if err := k8s.Get(ctx, key, live); err == nil {
		if err := k8s.Delete(ctx, live); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(live.DeepCopy())
		live.Finalizers = nil
		if err := k8s.Patch(ctx, live, patch); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	gone := func() error {
		if err := k8s.Get(ctx, key, &v1alpha1.GitOpsCluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s still there (%v)", key, err)
		}
		return nil
	}
	eventually(t, "the held GitOpsCluster gone", gone)
	again := createGitOpsCluster(t, goc.Namespace, goc.Name, goc.Spec.PlacementRef.Name, withAddress(goc.Spec.ArgoCDAgentAddon.PrincipalServerAddress))
	eventually(t, "the rebuilt GitOpsCluster reconciled", func() error {
		if !slices.Contains(getGOC(t, goc.Namespace, goc.Name).Finalizers, v1alpha1.Finalizer) {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})
	if err := k8s.Delete(ctx, again); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rebuilt GitOpsCluster cleaned up", gone)
}
