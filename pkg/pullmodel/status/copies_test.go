package status_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/status"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// TestReadingFeedbackCopiesNothing: the status controller runs at each feedback change of every
// Application and reads the Application and its ManifestWork from the cache. It copied both
// each time, each as large as the object decoded (the cache's shared parts copied too): while
// an ApplicationSet rolled, one of the largest parts of what the pull model allocated. A
// reconcile that finds the status as the feedback says may allocate a little, never copies.
func TestReadingFeedbackCopiesNothing(t *testing.T) {
	// An API server of its own: the package's manager would reconcile the Applications too.
	const apps = 100
	env, ctx := pulltest.StartOwnEnv(t, pulltest.ArgoNS, "cluster-1")
	c := env.Client
	var names []types.NamespacedName
	for i := range apps {
		// Its ManifestWork as the manager writes it, with the feedback OCM's work agent reports.
		app, w := pulltest.CreateDelivered(ctx, t, c, fmt.Sprintf("app-%03d", i), "cluster-1")
		names = append(names, types.NamespacedName{Namespace: app.GetNamespace(), Name: app.GetName()})
		w.Status.ResourceStatus.Manifests = syncedAndHealthy(app)
		if err := c.Status().Update(ctx, w); err != nil {
			t.Fatal(err)
		}
	}

	cfg := pullmodelsetup.DefaultConfig()
	informers := pulltest.StartPullCache(ctx, t, env, cfg)
	r := &status.Reconciler{Client: c, Cache: informers}
	// The first pass writes each status; once the cache holds them, a pass has nothing to write.
	poll.Until(t, "every Application's status as its feedback says", 30*time.Second, func() error {
		for _, n := range names {
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: n}); err != nil {
				return err
			}
		}
		for _, n := range names {
			app := pullmodel.NewApplication()
			if err := informers.Get(ctx, n, app); err != nil {
				return err
			}
			w := &workv1.ManifestWork{}
			if err := informers.Get(ctx, types.NamespacedName{Namespace: "cluster-1", Name: pullmodel.WorkName(app.GetName(), string(app.GetUID()))}, w); err != nil {
				return err
			}
			if patch := status.Patch(app, w); patch != nil {
				return fmt.Errorf("%s: %v still to write", n.Name, patch)
			}
		}
		return nil
	})

	allocated := pulltest.LeastAllocated(5, func() {
		for _, n := range names {
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: n}); err != nil {
				t.Fatal(err)
			}
		}
	})
	perApp := float64(allocated) / apps
	t.Logf("a reconcile with nothing to write allocated %.0f bytes per Application", perApp)
	// Comparing the status with the feedback takes about 5 KB; copies of the Application and its
	// ManifestWork took 8 KB more.
	if perApp > 8000 {
		t.Errorf("a reconcile allocated %.0f bytes per Application: it copies what it reads", perApp)
	}
}

// TestStatusWriteIsAnsweredWithMetadata: the API server's answer to a status write is the
// Application's metadata only. Nothing reads the answer, and the whole Application decoded was
// a third of what a write allocated while an ApplicationSet rolled.
func TestStatusWriteIsAnsweredWithMetadata(t *testing.T) {
	env, ctx := pulltest.StartOwnEnv(t, pulltest.ArgoNS, "cluster-1")
	app, w := pulltest.CreateDelivered(ctx, t, env.Client, "guestbook", "cluster-1")
	w.Status.ResourceStatus.Manifests = syncedAndHealthy(app)
	if err := env.Client.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	c := pulltest.NewPatchAnswers(t, env)
	r := &status.Reconciler{Client: c, Cache: pulltest.StartPullCache(ctx, t, env, pullmodelsetup.DefaultConfig())}
	key := types.NamespacedName{Namespace: app.GetNamespace(), Name: app.GetName()}
	poll.Until(t, "the hub Application Healthy", 30*time.Second, func() error {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			return err
		}
		got := pullmodel.NewApplication()
		if err := env.Client.Get(ctx, key, got); err != nil {
			return err
		}
		if h, _, _ := unstructured.NestedString(got.Object, "status", "health", "status"); h != "Healthy" {
			return fmt.Errorf("health %q", h)
		}
		return nil
	})
	accepts := c.Accepts()
	if len(accepts) == 0 {
		t.Fatal("no PATCH request")
	}
	for _, accept := range accepts {
		if !strings.Contains(accept, "as=PartialObjectMetadata") {
			t.Errorf("a status write asked for the whole Application back (Accept: %s)", accept)
		}
	}
}

// syncedAndHealthy is the status OCM's work agent reports for the ManifestWork of app once the
// spoke's Argo CD has synced it.
func syncedAndHealthy(app *unstructured.Unstructured) []workv1.ManifestCondition {
	return []workv1.ManifestCondition{{
		ResourceMeta: workv1.ManifestResourceMeta{Group: pullmodel.ArgoGroupVersion.Group, Version: pullmodel.ArgoGroupVersion.Version, Kind: "Application", Resource: "applications", Namespace: pulltest.ArgoNS, Name: app.GetName()},
		StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{
			{Name: propagation.FeedbackHealth, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To("Healthy")}},
			{Name: propagation.FeedbackSync, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To("Synced")}},
			{Name: propagation.FeedbackRevision, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To("0123456789abcdef")}},
		}},
		Conditions: []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestComplete", Message: "Apply manifest complete", LastTransitionTime: metav1.Now()}},
	}}
}
