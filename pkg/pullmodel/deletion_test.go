package pullmodel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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
	time.Sleep(time.Second)
	if f := getApp(t, app.GetName()).GetFinalizers(); len(f) != 1 {
		t.Fatalf("finalizers %v released while the ManifestWork (and the spoke's workload) still exist", f)
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
