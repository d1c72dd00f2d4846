package propagation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// TestDeletion: deleting a hub Application with Argo CD's resources finalizer deletes its
// ManifestWork and, once that is gone, releases the finalizer (the hub's Argo CD, kept away by
// skip-reconcile, never would), so the Application goes.
func TestDeletion(t *testing.T) {
	ctx := context.Background()
	s.CreateCluster(t, "del1", true)
	s.SetAvailable(t, "del1", true)
	app := pulltest.NewApp("del-guestbook", "del1")
	app.SetFinalizers([]string{pullmodel.ResourcesFinalizer})
	s.Create(t, app)
	app = s.GetApp(t, app.GetName())
	w := s.WaitWork(t, app, "del1")
	// The work agent's finalizer: the ManifestWork lingers until the spoke's objects are gone.
	w.Finalizers = append(w.Finalizers, "cluster.open-cluster-management.io/manifest-work-cleanup")
	if err := s.Client.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "the ManifestWork deleted", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := &workv1.ManifestWork{}
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
			return false, err.Error()
		}
		return cur.DeletionTimestamp != nil, "not deleting"
	})
	time.Sleep(pulltest.OfflineRelease + time.Second)
	if f := s.GetApp(t, app.GetName()).GetFinalizers(); len(f) != 1 {
		t.Fatalf("finalizers %v released while the ManifestWork (and the spoke's workload) still exist on an available cluster", f)
	}
	// The work agent is done.
	cur := &workv1.ManifestWork{}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatal(err)
	}
	cur.Finalizers = nil
	if err := s.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "the hub Application gone", 15*time.Second, func(ctx context.Context) (bool, string) {
		err := s.Client.Get(ctx, client.ObjectKeyFromObject(app), pullmodel.NewApplication())
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestDeletionWhileTheClusterIsOffline: a deleted hub Application whose cluster is unavailable
// is not held forever: once the ManifestWork has waited --pull-model-offline-release-after, the
// finalizer is released with a Warning Event, and the ManifestWork stays marked for deletion (the
// work agent finishes it when the cluster is back). The annotation releases at once, even on an
// available cluster.
func TestDeletionWhileTheClusterIsOffline(t *testing.T) {
	ctx := context.Background()
	deleteWithWorkAgentFinalizer := func(cluster, name string, annotate bool) (*workv1.ManifestWork, time.Time) {
		app := pulltest.NewApp(name, cluster)
		app.SetFinalizers([]string{pullmodel.ResourcesFinalizer})
		s.Create(t, app)
		app = s.GetApp(t, app.GetName())
		w := s.WaitWork(t, app, cluster)
		w.Finalizers = append(w.Finalizers, "cluster.open-cluster-management.io/manifest-work-cleanup")
		if err := s.Client.Update(ctx, w); err != nil {
			t.Fatal(err)
		}
		if annotate {
			patchApp(t, name, fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, pullmodel.AnnotationReleaseWithoutCluster))
		}
		deleted := time.Now()
		if err := s.Client.Delete(ctx, app); err != nil {
			t.Fatal(err)
		}
		return w, deleted
	}
	gone := func(name string) func(ctx context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			app := pullmodel.NewApplication()
			err := s.Client.Get(ctx, client.ObjectKey{Namespace: pulltest.ArgoNS, Name: name}, app)
			return apierrors.IsNotFound(err), fmt.Sprintf("finalizers %v, %v", app.GetFinalizers(), err)
		}
	}

	// Offline: released after the wait, not before.
	s.CreateCluster(t, "offline1", true)
	s.SetAvailable(t, "offline1", false)
	w, deleted := deleteWithWorkAgentFinalizer("offline1", "offline-app", false)
	poll.UntilState(t, "the finalizer released while the cluster is offline", pulltest.OfflineRelease+20*time.Second, gone("offline-app"))
	// The wait runs from the ManifestWork's deletion timestamp, which has whole seconds.
	if waited := time.Since(deleted); waited < pulltest.OfflineRelease-time.Second {
		t.Errorf("released after %s, before the %s wait", waited, pulltest.OfflineRelease)
	}
	cur := &workv1.ManifestWork{}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil || cur.DeletionTimestamp == nil {
		t.Errorf("the ManifestWork should stay marked for deletion for the cluster to finish: %v", err)
	}
	poll.UntilState(t, "a Warning Event says so", 10*time.Second, func(ctx context.Context) (bool, string) {
		return hasEvent(ctx, pulltest.ArgoNS, "offline-app", propagation.ReasonReleasedWithoutCluster)
	})

	// Available: the cluster is deleting, wait however long. An outage that begins long after
	// the deletion counts from its own start, not from the deletion.
	s.CreateCluster(t, "online1", true)
	s.SetAvailable(t, "online1", true)
	deleteWithWorkAgentFinalizer("online1", "online-app", false)
	time.Sleep(pulltest.OfflineRelease + 2*time.Second)
	if app := s.GetApp(t, "online-app"); len(app.GetFinalizers()) != 1 {
		t.Fatalf("released on an available cluster: finalizers %v", app.GetFinalizers())
	}
	s.SetAvailable(t, "online1", false)
	wentOffline := time.Now()
	time.Sleep(time.Second)
	if app := s.GetApp(t, "online-app"); len(app.GetFinalizers()) != 1 {
		t.Fatalf("released %s into an outage that began after the deletion: finalizers %v", time.Since(wentOffline), app.GetFinalizers())
	}
	poll.UntilState(t, "released once the outage itself lasted the wait", pulltest.OfflineRelease+20*time.Second, gone("online-app"))
	if waited := time.Since(wentOffline); waited < pulltest.OfflineRelease-time.Second {
		t.Errorf("released %s into the outage, before the %s wait", waited, pulltest.OfflineRelease)
	}

	// The annotation releases at once, even on an available cluster.
	s.CreateCluster(t, "online2", true)
	s.SetAvailable(t, "online2", true)
	deleteWithWorkAgentFinalizer("online2", "annotated-app", true)
	poll.UntilState(t, "released at the annotation's request", 15*time.Second, gone("annotated-app"))
}

// TestOrphanCleanup: ManifestWorks whose hub Application is gone (deleted while the manager
// was down) are removed when seen, and so is the work of an Application's earlier
// incarnation or of a cluster it no longer names.
func TestOrphanCleanup(t *testing.T) {
	ctx := context.Background()
	s.CreateCluster(t, "orph1", true)
	s.CreateCluster(t, "orph2", true)
	orphan := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Namespace: "orph1", Name: "gone-app-abcde",
			Labels:      map[string]string{pullmodel.LabelPull: "true"},
			Annotations: map[string]string{pullmodel.AnnotationHubAppNamespace: pulltest.ArgoNS, pullmodel.AnnotationHubAppName: "gone-app"}},
	}
	// Sealed as the manager seals what it writes: it wrote this one before it went down.
	sealer := s.Sealer(t)
	orphan.Annotations[seal.Annotation] = sealer.Sign(propagation.SealFields(orphan))
	s.Create(t, orphan)
	s.WorkGone(t, "the orphaned ManifestWork removed", "gone-app")

	app := pulltest.NewApp("moving-guestbook", "orph1")
	s.Create(t, app)
	app = s.GetApp(t, app.GetName())
	s.WaitWork(t, app, "orph1")
	patchApp(t, app.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"orph2"}}}`, pullmodel.AnnotationCluster))
	s.WaitWork(t, app, "orph2")
	poll.UntilState(t, "the work on the cluster it left removed", 10*time.Second, func(ctx context.Context) (bool, string) {
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: "orph1", Name: pullmodel.WorkName(app.GetName(), string(app.GetUID()))}, &workv1.ManifestWork{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	// Unmarked: it is no longer delivered.
	patchApp(t, app.GetName(), fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, pullmodel.LabelPull))
	s.WorkGone(t, "the work of an unmarked Application removed", app.GetName())
	_ = ctx
}

// hasEvent reports whether a Warning Event with that reason regards the named object.
func hasEvent(ctx context.Context, ns, name, reason string) (bool, string) {
	events := &eventsv1.EventList{}
	if err := s.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
		return false, err.Error()
	}
	for _, e := range events.Items {
		if e.Regarding.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
			return true, ""
		}
	}
	return false, "no Warning Event " + reason
}
