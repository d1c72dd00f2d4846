package status

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
)

// rollingApp is a hub Application in the middle of an ApplicationSet's RollingSync: its sync
// request (named request) delivered, and its ManifestWork's feedback saying the spoke ran it,
// as the fleet benchmark's work agents report it (three resources, two conditions).
func rollingApp(tb testing.TB) (*unstructured.Unstructured, *workv1.ManifestWork) {
	tb.Helper()
	const request = "1764561234000000000"
	app := pullmodel.NewApplication()
	app.SetNamespace("argocd")
	app.SetName("guestbook-00042")
	app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
	app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: "cluster-042", pullmodel.AnnotationSkipReconcile: "true"})
	app.Object["spec"] = map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": "https://git.example/guestbook", "path": "guestbook", "targetRevision": "main"},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "guestbook"},
		"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true}},
	}
	app.Object["operation"] = map[string]any{"sync": map[string]any{"revision": "main", "prune": true}, "initiatedBy": map[string]any{"automated": true}}
	app.Object["status"] = map[string]any{
		"sync":   map[string]any{"status": "OutOfSync", "revision": "0123456789abcdef"},
		"health": map[string]any{"status": "Healthy"},
	}
	w, err := propagation.Build(propagation.Input{App: app, OperationRequest: request})
	if err != nil {
		tb.Fatal(err)
	}
	resources := resourcelist.Encode([]resourcelist.Resource{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "apps", Name: "guestbook-00042"},
		{Version: "v1", Kind: "Service", Namespace: "apps", Name: "guestbook-00042"},
		{Version: "v1", Kind: "ConfigMap", Namespace: "apps", Name: "guestbook-00042-settings"},
	})
	fb := map[string]string{
		propagation.FeedbackSync:                      "Synced",
		propagation.FeedbackHealth:                    "Healthy",
		propagation.FeedbackRevision:                  "0123456789abcdef",
		propagation.FeedbackOperationPhase:            "Succeeded",
		propagation.FeedbackOperationStarted:          "2026-12-01T05:00:00Z",
		propagation.FeedbackOperationEnded:            "2026-12-01T05:00:03Z",
		propagation.FeedbackOperationMessage:          "successfully synced (all tasks run)",
		propagation.FeedbackOperationRequest:          request,
		propagation.FeedbackConditionTypes:            "OrphanedResourceWarning",
		propagation.FeedbackConditionMessages:         "Application has 1 orphaned resources",
		propagation.FeedbackConditionTimes:            "2026-01-01T00:00:00Z",
		propagation.FeedbackErrorMessage("SyncError"): "one or more synchronization tasks are not valid",
		propagation.FeedbackErrorTime("SyncError"):    "2026-01-01T00:00:01Z",
		propagation.FeedbackResourceList:              resources,
	}
	var vals []workv1.FeedbackValue
	for k, v := range fb {
		vals = append(vals, workv1.FeedbackValue{Name: k, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(v)}})
	}
	w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
		ResourceMeta:    workv1.ManifestResourceMeta{Group: pullmodel.ArgoGroupVersion.Group, Version: pullmodel.ArgoGroupVersion.Version, Kind: "Application", Resource: "applications", Namespace: "argocd", Name: app.GetName()},
		StatusFeedbacks: workv1.StatusFeedbackResult{Values: vals},
	}}
	return app, w
}

// patched is app with patch applied, as the API server stores it (JSON numbers and all).
func patched(tb testing.TB, app *unstructured.Unstructured, patch map[string]any) *unstructured.Unstructured {
	tb.Helper()
	doc, err := json.Marshal(app.Object)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := json.Marshal(patch)
	if err != nil {
		tb.Fatal(err)
	}
	merged, err := jsonpatch.MergePatch(doc, p)
	if err != nil {
		tb.Fatal(err)
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(merged); err != nil {
		tb.Fatal(err)
	}
	return out
}

// running is w with feedback of a sync the spoke has started and not finished.
func running(w *workv1.ManifestWork) *workv1.ManifestWork {
	out := w.DeepCopy()
	m := &out.Status.ResourceStatus.Manifests[0].StatusFeedbacks
	m.Values = slices.DeleteFunc(m.Values, func(v workv1.FeedbackValue) bool { return v.Name == propagation.FeedbackOperationEnded })
	for i := range m.Values {
		if m.Values[i].Name == propagation.FeedbackOperationPhase {
			m.Values[i].Value.String = ptr.To("Running")
		}
	}
	return out
}

// BenchmarkPatchWhileRolling: the status controller's comparison at each feedback change of
// an Application in a RollingSync: while the spoke runs the sync and the hub shows that
// (nothing to write, the request still outstanding), once the spoke has run it (a patch to
// write), and once the hub shows it all (nothing to write).
func BenchmarkPatchWhileRolling(b *testing.B) {
	app, w := rollingApp(b)
	settle := func(app *unstructured.Unstructured, w *workv1.ManifestWork) *unstructured.Unstructured {
		p := PatchWithProject(app, w, nil)
		if p == nil {
			b.Fatal("nothing to write for new feedback")
		}
		out := patched(b, app, p)
		if p := PatchWithProject(out, w, nil); p != nil {
			b.Fatalf("the patched Application still differs: %v", p)
		}
		return out
	}
	wRunning := running(w)
	shownRunning := settle(app, wRunning)
	if _, ok := shownRunning.Object["operation"]; !ok {
		b.Fatal("the request was cleared while the spoke runs it")
	}
	settled := settle(app, w)
	for _, c := range []struct {
		name  string
		app   *unstructured.Unstructured
		w     *workv1.ManifestWork
		write bool
	}{{"RunningNothingToWrite", shownRunning, wRunning, false}, {"SyncRun", app, w, true}, {"NothingToWrite", settled, w, false}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p := PatchWithProject(c.app, c.w, nil); (p != nil) != c.write {
					b.Fatal(fmt.Sprint("unexpected patch: ", p))
				}
			}
		})
	}
}
