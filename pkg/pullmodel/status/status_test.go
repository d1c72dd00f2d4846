package status

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
)

func work(op map[string]any, baseline string, fb map[string]string) *workv1.ManifestWork {
	w := &workv1.ManifestWork{}
	raw := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application"}`
	if op != nil {
		raw = `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","operation":{"sync":{"revision":"main"}}}`
		w.Annotations = map[string]string{pullmodel.AnnotationOperationBaseline: baseline}
	}
	w.Spec.Workload.Manifests = []workv1.Manifest{{}}
	w.Spec.Workload.Manifests[0].Raw = []byte(raw)
	var vals []workv1.FeedbackValue
	for k, v := range fb {
		vals = append(vals, workv1.FeedbackValue{Name: k, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(v)}})
	}
	w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Resource: "applications"}, StatusFeedbacks: workv1.StatusFeedbackResult{Values: vals}}}
	return w
}

func TestPatchNothingWhenEqual(t *testing.T) {
	app := pullmodel.NewApplication()
	app.Object["status"] = map[string]any{"sync": map[string]any{"status": "Synced", "comparedTo": map[string]any{"x": "y"}}, "health": map[string]any{"status": "Healthy"}}
	if p := Patch(app, work(nil, "", map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy"})); p != nil {
		t.Errorf("equal status patched: %v", p)
	}
	if p := Patch(app, work(nil, "", map[string]string{"syncStatus": "OutOfSync", "healthStatus": "Healthy"})); p == nil {
		t.Error("a sync change not patched")
	}
	if p := Patch(app, work(nil, "", nil)); p != nil {
		t.Errorf("no feedback yet, patched anyway: %v", p)
	}
}

func TestPatchClearsOperationOnlyAfterTheSpokeStartedIt(t *testing.T) {
	op := map[string]any{"sync": map[string]any{"revision": "main"}}
	app := pullmodel.NewApplication()
	app.Object["operation"] = op
	fb := map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy", "operationStatePhase": "Succeeded", "operationStateStartedAt": "T1"}
	if p := Patch(app, work(op, "T1", fb)); p != nil {
		if _, ok := p["operation"]; ok {
			t.Error("cleared while the spoke's last start is still the baseline")
		}
	}
	if p := Patch(app, work(nil, "", fb)); p != nil {
		if _, ok := p["operation"]; ok {
			t.Error("cleared although the ManifestWork does not carry the operation yet")
		}
	}
	fb["operationStateStartedAt"] = "T2"
	p := Patch(app, work(op, "T1", fb))
	if v, ok := p["operation"]; !ok || v != nil {
		t.Errorf("not cleared after the spoke started a new operation: %v", p)
	}
	started, _, _ := unstructured.NestedString(p, "status", "operationState", "startedAt")
	if started != "T2" {
		t.Errorf("operationState.startedAt %q, want the spoke's T2 (RollingSync compares it)", started)
	}
	if rev, _, _ := unstructured.NestedString(p, "status", "operationState", "operation", "sync", "revision"); rev != "main" {
		t.Errorf("operationState.operation %v, want the request that was delivered", p["status"])
	}
}

func TestPatchClearsRefreshOnceTheSpokeReconciled(t *testing.T) {
	app := pullmodel.NewApplication()
	app.SetAnnotations(map[string]string{pullmodel.AnnotationRefresh: "normal"})
	sent := func(reconciledAt string) *workv1.ManifestWork {
		w := work(nil, "", map[string]string{"syncStatus": "Synced", "reconciledAt": reconciledAt})
		w.Spec.Workload.Manifests[0].Raw = []byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`)
		w.Annotations = map[string]string{pullmodel.AnnotationRefreshBaseline: "R1"}
		return w
	}
	if p := Patch(app, sent("R1")); p != nil && p["metadata"] != nil {
		t.Errorf("refresh cleared before the spoke reconciled again: %v", p)
	}
	p := Patch(app, sent("R2"))
	ann, _, _ := unstructured.NestedFieldNoCopy(p, "metadata", "annotations")
	m, ok := ann.(map[string]any)
	if _, has := m[pullmodel.AnnotationRefresh]; !ok || !has || m[pullmodel.AnnotationRefresh] != nil {
		t.Errorf("refresh not cleared after the spoke reconciled: %v", p)
	}
}

// TestPatchRollingSyncRequest: RollingSync's request (with an integer, read back from the API
// server as int64 while the ManifestWork's payload decodes it as float64) is kept on the hub
// while the spoke runs it, cleared once it has finished, not cleared again when the
// ApplicationSet asks anew with the same request, and an idle Application gets no writes.
func TestPatchRollingSyncRequest(t *testing.T) {
	const op = `{"initiatedBy":{"username":"applicationset-controller","automated":true},"sync":{"revision":"abc123","prune":true},"retry":{"limit":5}}`
	app := func(status string) *unstructured.Unstructured {
		raw := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"a","namespace":"argocd"},"operation":` + op
		if status != "" {
			raw += `,"status":` + status
		}
		obj, _, err := unstructured.UnstructuredJSONScheme.Decode([]byte(raw+"}"), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*unstructured.Unstructured)
	}
	sent := func(fb map[string]string) *workv1.ManifestWork {
		w := work(nil, "", fb)
		w.Spec.Workload.Manifests[0].Raw = []byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","operation":` + op + `}`)
		w.Annotations = map[string]string{pullmodel.AnnotationOperationBaseline: ""}
		return w
	}
	running := map[string]string{"syncStatus": "OutOfSync", "healthStatus": "Missing", "operationStatePhase": "Running", "operationStateStartedAt": "S1"}
	p := Patch(app(""), sent(running))
	if _, ok := p["operation"]; ok {
		t.Error("cleared while the spoke runs it")
	}
	if limit, _, _ := unstructured.NestedFieldNoCopy(p, "status", "operationState", "operation", "retry", "limit"); limit == nil {
		t.Errorf("operationState.operation is not the running request: %v", p["status"])
	}
	shownRunning := `{"sync":{"status":"OutOfSync","revision":null},"health":{"status":"Missing"},"operationState":{"phase":"Running","startedAt":"S1","operation":` + op + `}}`
	if p := Patch(app(shownRunning), sent(running)); p != nil {
		t.Errorf("idle, but patched (a write per reconcile): %v", p)
	}
	done := map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy", "operationStatePhase": "Succeeded", "operationStateStartedAt": "S1", "operationStateFinishedAt": "S2"}
	p = Patch(app(shownRunning), sent(done))
	if v, ok := p["operation"]; !ok || v != nil {
		t.Errorf("not cleared once the spoke finished it: %v", p)
	}
	shownDone := `{"sync":{"status":"Synced","revision":null},"health":{"status":"Healthy"},"operationState":{"phase":"Succeeded","startedAt":"S1","finishedAt":"S2","operation":` + op + `}}`
	if p := Patch(app(shownDone), sent(done)); p != nil {
		t.Errorf("the same request asked anew is cleared or patched again: %v", p)
	}
}
