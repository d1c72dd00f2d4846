package pullmodel_test

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
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
)

// TestDeletion: deleting a hub Application with Argo CD's resources finalizer deletes its
// ManifestWork and, once that is gone, releases the finalizer (the hub's Argo CD, kept away by
// skip-reconcile, never would), so the Application goes.
func TestDeletion(t *testing.T) {
	ctx := context.Background()
	createCluster(t, "del1", true)
	setAvailable(t, "del1", true)
	app := newApp("del-guestbook", "del1")
	app.SetFinalizers([]string{pullmodel.ResourcesFinalizer})
	create(t, app)
	app = getApp(t, app.GetName())
	w := waitWork(t, app, "del1")
	// The work agent's finalizer: the ManifestWork lingers until the spoke's objects are gone.
	w.Finalizers = append(w.Finalizers, "cluster.open-cluster-management.io/manifest-work-cleanup")
	if err := k8s.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ManifestWork deleted", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := &workv1.ManifestWork{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
			return false, err.Error()
		}
		return cur.DeletionTimestamp != nil, "not deleting"
	})
	time.Sleep(offlineRelease + time.Second)
	if f := getApp(t, app.GetName()).GetFinalizers(); len(f) != 1 {
		t.Fatalf("finalizers %v released while the ManifestWork (and the spoke's workload) still exist on an available cluster", f)
	}
	// The work agent is done.
	cur := &workv1.ManifestWork{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatal(err)
	}
	cur.Finalizers = nil
	if err := k8s.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hub Application gone", 15*time.Second, func(ctx context.Context) (bool, string) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(app), pullmodel.NewApplication())
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
		app := newApp(name, cluster)
		app.SetFinalizers([]string{pullmodel.ResourcesFinalizer})
		create(t, app)
		app = getApp(t, app.GetName())
		w := waitWork(t, app, cluster)
		w.Finalizers = append(w.Finalizers, "cluster.open-cluster-management.io/manifest-work-cleanup")
		if err := k8s.Update(ctx, w); err != nil {
			t.Fatal(err)
		}
		if annotate {
			patchApp(t, name, fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, pullmodel.AnnotationReleaseWithoutCluster))
		}
		deleted := time.Now()
		if err := k8s.Delete(ctx, app); err != nil {
			t.Fatal(err)
		}
		return w, deleted
	}
	gone := func(name string) func(ctx context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			app := pullmodel.NewApplication()
			err := k8s.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: name}, app)
			return apierrors.IsNotFound(err), fmt.Sprintf("finalizers %v, %v", app.GetFinalizers(), err)
		}
	}

	// Offline: released after the wait, not before.
	createCluster(t, "offline1", true)
	setAvailable(t, "offline1", false)
	w, deleted := deleteWithWorkAgentFinalizer("offline1", "offline-app", false)
	eventually(t, "the finalizer released while the cluster is offline", offlineRelease+20*time.Second, gone("offline-app"))
	// The wait runs from the ManifestWork's deletion timestamp, which has whole seconds.
	if waited := time.Since(deleted); waited < offlineRelease-time.Second {
		t.Errorf("released after %s, before the %s wait", waited, offlineRelease)
	}
	cur := &workv1.ManifestWork{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil || cur.DeletionTimestamp == nil {
		t.Errorf("the ManifestWork should stay marked for deletion for the cluster to finish: %v", err)
	}
	eventually(t, "a Warning Event says so", 10*time.Second, func(ctx context.Context) (bool, string) {
		return hasEvent(ctx, argoNS, "offline-app", propagation.ReasonReleasedWithoutCluster)
	})

	// Available: the cluster is deleting, wait however long. An outage that begins long after
	// the deletion counts from its own start, not from the deletion.
	createCluster(t, "online1", true)
	setAvailable(t, "online1", true)
	deleteWithWorkAgentFinalizer("online1", "online-app", false)
	time.Sleep(offlineRelease + 2*time.Second)
	if app := getApp(t, "online-app"); len(app.GetFinalizers()) != 1 {
		t.Fatalf("released on an available cluster: finalizers %v", app.GetFinalizers())
	}
	setAvailable(t, "online1", false)
	wentOffline := time.Now()
	time.Sleep(time.Second)
	if app := getApp(t, "online-app"); len(app.GetFinalizers()) != 1 {
		t.Fatalf("released %s into an outage that began after the deletion: finalizers %v", time.Since(wentOffline), app.GetFinalizers())
	}
	eventually(t, "released once the outage itself lasted the wait", offlineRelease+20*time.Second, gone("online-app"))
	if waited := time.Since(wentOffline); waited < offlineRelease-time.Second {
		t.Errorf("released %s into the outage, before the %s wait", waited, offlineRelease)
	}

	// The annotation releases at once, even on an available cluster.
	createCluster(t, "online2", true)
	setAvailable(t, "online2", true)
	deleteWithWorkAgentFinalizer("online2", "annotated-app", true)
	eventually(t, "released at the annotation's request", 15*time.Second, gone("annotated-app"))
}

// TestOrphanCleanup: ManifestWorks whose hub Application is gone (deleted while the manager
// was down) are removed when seen, and so is the work of an Application's earlier
// incarnation or of a cluster it no longer names.
func TestOrphanCleanup(t *testing.T) {
	ctx := context.Background()
	createCluster(t, "orph1", true)
	createCluster(t, "orph2", true)
	orphan := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Namespace: "orph1", Name: "gone-app-abcde",
			Labels:      map[string]string{pullmodel.LabelPull: "true"},
			Annotations: map[string]string{pullmodel.AnnotationHubAppNamespace: argoNS, pullmodel.AnnotationHubAppName: "gone-app"}},
	}
	// Sealed as the manager seals what it writes: it wrote this one before it went down.
	key, err := seal.LoadOrCreateKey(ctx, k8s, k8s, pullmodelsetup.DefaultConfig().SealSecret)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	orphan.Annotations[seal.Annotation] = sealer.Sign(propagation.SealFields(orphan))
	create(t, orphan)
	workGone(t, "the orphaned ManifestWork removed", "gone-app")

	app := newApp("moving-guestbook", "orph1")
	create(t, app)
	app = getApp(t, app.GetName())
	waitWork(t, app, "orph1")
	patchApp(t, app.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"orph2"}}}`, pullmodel.AnnotationCluster))
	waitWork(t, app, "orph2")
	eventually(t, "the work on the cluster it left removed", 10*time.Second, func(ctx context.Context) (bool, string) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "orph1", Name: pullmodel.WorkName(app.GetName(), string(app.GetUID()))}, &workv1.ManifestWork{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	// Unmarked: it is no longer delivered.
	patchApp(t, app.GetName(), fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, pullmodel.LabelPull))
	workGone(t, "the work of an unmarked Application removed", app.GetName())
	_ = ctx
}

// hasEvent reports whether a Warning Event with that reason regards the named object.
func hasEvent(ctx context.Context, ns, name, reason string) (bool, string) {
	events := &eventsv1.EventList{}
	if err := k8s.List(ctx, events, client.InNamespace(ns)); err != nil {
		return false, err.Error()
	}
	for _, e := range events.Items {
		if e.Regarding.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
			return true, ""
		}
	}
	return false, "no Warning Event " + reason
}
