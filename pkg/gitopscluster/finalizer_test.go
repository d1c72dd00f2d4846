package gitopscluster_test

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
)

// TestFinalizerPatchesKeepAnotherControllersFinalizer: the reconciler adds and removes its
// finalizer from the copy it read; another controller adding its own finalizer after that
// read must not lose it (a merge patch replaces the whole list).
func TestFinalizerPatchesKeepAnotherControllersFinalizer(t *testing.T) {
	ctx := context.Background()
	const theirs = "example.com/keep"
	ns := "finalizers"
	createNamespace(t, ns)
	// Without the manager, nothing but this test writes these objects.
	stopManager()
	defer startManager()

	for name, tc := range map[string]struct {
		initial []string
		patch   func(context.Context, client.Client, *v1alpha1.GitOpsCluster) error
	}{
		"add":    {nil, gitopscluster.AddFinalizer},
		"remove": {[]string{v1alpha1.Finalizer}, gitopscluster.RemoveFinalizer},
	} {
		t.Run(name, func(t *testing.T) {
			g := createGitOpsCluster(t, ns, name, "p", func(g *v1alpha1.GitOpsCluster) { g.Finalizers = tc.initial })
			read := g.DeepCopy()
			// Another controller adds its finalizer after the reconciler's read.
			other := g.DeepCopy()
			other.Finalizers = append(other.Finalizers, theirs)
			if err := k8s.Update(ctx, other); err != nil {
				t.Fatal(err)
			}
			err := tc.patch(ctx, k8s, read)
			if !apierrors.IsConflict(err) {
				t.Errorf("patching from a stale read: got %v, want a conflict (the reconcile is retried)", err)
			}
			now := getGOC(t, ns, name)
			if !slices.Contains(now.Finalizers, theirs) {
				t.Errorf("another controller's finalizer was dropped: %v", now.Finalizers)
			}
			// A retry from a fresh read does what it must.
			if err := tc.patch(ctx, k8s, now); err != nil {
				t.Fatal(err)
			}
			now = getGOC(t, ns, name)
			if has := slices.Contains(now.Finalizers, v1alpha1.Finalizer); has != (tc.initial == nil) {
				t.Errorf("after the retry the finalizers are %v", now.Finalizers)
			}
			now.Finalizers = nil
			if err := k8s.Update(ctx, now); err != nil {
				t.Fatal(err)
			}
			if err := k8s.Delete(ctx, now); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStatusWrittenFromAStaleReadIsRetried: the status is written as a merge patch against the
// copy read; from a copy older than the server's, a list emptied since would stay on the
// server. The write is refused instead, and the reconcile retried.
func TestStatusWrittenFromAStaleReadIsRetried(t *testing.T) {
	ctx := context.Background()
	ns := "stale-status"
	createNamespace(t, ns)
	stopManager()
	defer startManager()

	g := createGitOpsCluster(t, ns, "fleet", "p")
	stale := g.DeepCopy()
	// A write the stale copy has not seen: two clusters unavailable.
	g.Status.SelectedClusters = 2
	g.Status.UnavailableClusters = []v1alpha1.ClusterAgentState{{Name: "a", Reason: "AddOnNotInstalled"}, {Name: "b", Reason: "AddOnNotInstalled"}}
	if err := k8s.Status().Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	// Now every agent is available: the new status has no unavailable clusters.
	want := &v1alpha1.GitOpsClusterStatus{SelectedClusters: 2, AvailableAgents: 2}
	err := gitopscluster.WriteStatus(ctx, k8s, stale, want)
	if !apierrors.IsConflict(err) {
		t.Errorf("status written from a stale read: got %v, want a conflict", err)
	}
	if err := gitopscluster.WriteStatus(ctx, k8s, getGOC(t, ns, "fleet"), want); err != nil {
		t.Fatal(err)
	}
	if got := getGOC(t, ns, "fleet").Status; got.AvailableAgents != 2 || len(got.UnavailableClusters) != 0 {
		t.Errorf("status after the retry: available %d, unavailable %v", got.AvailableAgents, got.UnavailableClusters)
	}
}

// staleGitOpsCluster answers reads of one GitOpsCluster with a copy made before its finalizer
// was removed, as a cache that has not yet seen the removal does.
type staleGitOpsCluster struct {
	client.Client
	stale *v1alpha1.GitOpsCluster
}

func (c staleGitOpsCluster) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if g, ok := obj.(*v1alpha1.GitOpsCluster); ok && key == client.ObjectKeyFromObject(c.stale) {
		c.stale.DeepCopyInto(g)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestFinalizeOfAGitOpsClusterAlreadyGone: a pass woken during the deletion may read, from a
// cache behind the server, a GitOpsCluster whose finalizer an earlier pass removed. Its
// cleanup finds the object gone; that is the end of the deletion, not an error to retry.
func TestFinalizeOfAGitOpsClusterAlreadyGone(t *testing.T) {
	ctx := context.Background()
	ns := "finalized-gone"
	createNamespace(t, ns)
	stopManager()
	defer startManager()

	createGitOpsCluster(t, ns, "fleet", "p", func(g *v1alpha1.GitOpsCluster) { g.Finalizers = []string{v1alpha1.Finalizer} })
	if err := k8s.Delete(ctx, getGOC(t, ns, "fleet")); err != nil {
		t.Fatal(err)
	}
	stale := getGOC(t, ns, "fleet")
	if stale.DeletionTimestamp.IsZero() || !slices.Contains(stale.Finalizers, v1alpha1.Finalizer) {
		t.Fatalf("the copy should be a deletion held by the finalizer: deletion %v, finalizers %v", stale.DeletionTimestamp, stale.Finalizers)
	}
	if err := gitopscluster.RemoveFinalizer(ctx, k8s, stale.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(stale), &v1alpha1.GitOpsCluster{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the GitOpsCluster should be gone once its finalizer is removed: %v", err)
	}
	r := &gitopscluster.Reconciler{Client: staleGitOpsCluster{Client: k8s, stale: stale}, APIReader: k8s, Config: testConfig()}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(stale)}); err != nil {
		t.Errorf("reconciling the deletion from a stale copy: %v, want no error", err)
	}
}
