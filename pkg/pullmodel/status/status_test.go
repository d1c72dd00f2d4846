package status

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
)

// work is a ManifestWork of an Application, carrying op under the name request when op is not
// nil, with fb as its feedback.
func work(op map[string]any, request string, fb map[string]string) *workv1.ManifestWork {
	w := &workv1.ManifestWork{}
	raw := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application"}`
	if op != nil {
		raw = `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","operation":{"sync":{"revision":"main"},` +
			`"info":[{"name":"` + pullmodel.OperationRequestInfo + `","value":"` + request + `"}]}}`
		w.Annotations = map[string]string{pullmodel.AnnotationOperationRequest: request}
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

func TestPatchClearsOperationOnlyAfterTheSpokeRanIt(t *testing.T) {
	op := map[string]any{"sync": map[string]any{"revision": "main"}}
	app := pullmodel.NewApplication()
	app.Object["operation"] = op
	// The spoke's last run is of an earlier request (or one it started by itself).
	fb := map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy", "operationStatePhase": "Succeeded", "operationStateStartedAt": "T1", "operationStateRequest": "100"}
	if p := Patch(app, work(op, "130", fb)); p != nil {
		if _, ok := p["operation"]; ok {
			t.Error("cleared while the spoke's last run is of another request")
		}
	}
	if p := Patch(app, work(nil, "", fb)); p != nil {
		if _, ok := p["operation"]; ok {
			t.Error("cleared although the ManifestWork does not carry the operation yet")
		}
	}
	fb["operationStateRequest"], fb["operationStatePhase"] = "130", "Running"
	if p := Patch(app, work(op, "130", fb)); p != nil {
		if _, ok := p["operation"]; ok {
			t.Error("cleared while the spoke still runs it")
		}
	}
	// Run, and started within the second of the run before: only the name tells the runs apart.
	fb["operationStatePhase"] = "Succeeded"
	p := Patch(app, work(op, "130", fb))
	if v, ok := p["operation"]; !ok || v != nil {
		t.Errorf("not cleared after the spoke ran it: %v", p)
	}
	started, _, _ := unstructured.NestedString(p, "status", "operationState", "startedAt")
	if started != "T1" {
		t.Errorf("operationState.startedAt %q, want the spoke's T1 (RollingSync compares it)", started)
	}
	shown, _, _ := unstructured.NestedMap(p, "status", "operationState", "operation")
	if rev, _, _ := unstructured.NestedString(shown, "sync", "revision"); rev != "main" || !strings.Contains(fmt.Sprint(shown["info"]), "130") {
		t.Errorf("operationState.operation %v, want the request that was delivered, with its name", shown)
	}
}

func TestPatchClearsRefreshOnceTheSpokeReconciled(t *testing.T) {
	app := pullmodel.NewApplication()
	app.SetAnnotations(map[string]string{pullmodel.AnnotationRefresh: "normal"})
	const sentAt = "2026-01-01T00:00:10Z"
	sent := func(reconciledAt string) *workv1.ManifestWork {
		w := work(nil, "", map[string]string{"syncStatus": "Synced", "reconciledAt": reconciledAt})
		w.Spec.Workload.Manifests[0].Raw = []byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`)
		w.Annotations = map[string]string{pullmodel.AnnotationRefreshBaseline: sentAt}
		// As propagation builds it while a refresh is outstanding: with the reconcile-time rule.
		w.Spec.ManifestConfigs = []workv1.ManifestConfigOption{{FeedbackRules: []workv1.FeedbackRule{{Type: workv1.JSONPathsType,
			JsonPaths: []workv1.JsonPath{{Name: "reconciledAt", Path: ".status.reconciledAt"}}}}}}
		return w
	}
	// The spoke's reconcile time is fed back only once the request is in the ManifestWork, so
	// the first value may well be a reconcile from before it: that one must not count.
	for _, before := range []string{"2026-01-01T00:00:01Z", sentAt} {
		if p := Patch(app, sent(before)); p != nil && p["metadata"] != nil {
			t.Errorf("refresh cleared by a reconcile at %s, not after the request (%s): %v", before, sentAt, p)
		}
	}
	p := Patch(app, sent("2026-01-01T00:00:11Z"))
	ann, _, _ := unstructured.NestedFieldNoCopy(p, "metadata", "annotations")
	m, ok := ann.(map[string]any)
	if _, has := m[pullmodel.AnnotationRefresh]; !ok || !has || m[pullmodel.AnnotationRefresh] != nil {
		t.Errorf("refresh not cleared after the spoke reconciled: %v", p)
	}
	if at, _, _ := unstructured.NestedString(p, "status", "reconciledAt"); at != "2026-01-01T00:00:11Z" {
		t.Errorf("reconciledAt %q written with the clear, want the spoke's 2026-01-01T00:00:11Z (ApplicationSets compare it)", at)
	}
}

// TestPatchWritesNoReconcileTimeAlone: the spoke's Argo CD rewrites status.reconciledAt on every
// periodic refresh; with no request outstanding, that alone is no reason to write the hub
// Application (a ManifestWork of an earlier release still feeds it back).
func TestPatchWritesNoReconcileTimeAlone(t *testing.T) {
	app := pullmodel.NewApplication()
	app.Object["status"] = map[string]any{"sync": map[string]any{"status": "Synced"}, "health": map[string]any{"status": "Healthy"}, "reconciledAt": "2026-01-01T00:00:00Z"}
	fb := map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy", "reconciledAt": "2026-01-01T00:02:00Z"}
	if p := Patch(app, work(nil, "", fb)); p != nil {
		t.Errorf("a periodic refresh alone patched the hub Application: %v", p)
	}
	fb["healthStatus"] = "Degraded"
	p := Patch(app, work(nil, "", fb))
	if h, _, _ := unstructured.NestedString(p, "status", "health", "status"); h != "Degraded" {
		t.Errorf("health change not patched: %v", p)
	}
}

// TestPatchBringsBackWhyAnApplicationFails: the spoke Application's conditions and health
// message, and the work agent's failure to apply it, reach the hub Application, each message
// bounded; the hub's own delivery condition stays; conditions go when the cluster has none.
func TestPatchBringsBackWhyAnApplicationFails(t *testing.T) {
	app := pullmodel.NewApplication()
	delivery := map[string]any{"type": pullmodel.ConditionDeliveryError, "message": "hub says"}
	app.Object["status"] = map[string]any{"conditions": []any{delivery}}
	long := strings.Repeat("é", 2000)
	// A work agent with RawFeedbackJsonString reports the lists whole, as JSON.
	w := work(nil, "", map[string]string{"syncStatus": "Unknown", "healthStatus": "Degraded", "healthMessage": "no pods"})
	raw := func(name string, items ...string) {
		b, _ := json.Marshal(items)
		w.Status.ResourceStatus.Manifests[0].StatusFeedbacks.Values = append(w.Status.ResourceStatus.Manifests[0].StatusFeedbacks.Values,
			workv1.FeedbackValue{Name: name, Value: workv1.FieldValue{Type: workv1.JsonRaw, JsonRaw: ptr.To(string(b))}})
	}
	raw("conditionTypes", "ComparisonError", "SyncError")
	raw("conditionMessages", "rpc error: path does not exist", long)
	raw("conditionTransitionTimes", "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z")
	p := Patch(app, w)
	conds, _, _ := unstructured.NestedSlice(p, "status", "conditions")
	if len(conds) != 3 || conds[0].(map[string]any)["type"] != pullmodel.ConditionDeliveryError ||
		conds[1].(map[string]any)["type"] != "ComparisonError" || conds[1].(map[string]any)["message"] != "rpc error: path does not exist" ||
		conds[1].(map[string]any)["lastTransitionTime"] != "2026-01-01T00:00:00Z" || conds[2].(map[string]any)["type"] != "SyncError" {
		t.Fatalf("conditions %v", conds)
	}
	msg := conds[2].(map[string]any)["message"].(string)
	if len(msg) > MaxMessageBytes || !strings.HasSuffix(msg, "(truncated)") || !utf8.ValidString(msg) {
		t.Errorf("long message not bounded to %d bytes at a character boundary: %d bytes, valid UTF-8 %v", MaxMessageBytes, len(msg), utf8.ValidString(msg))
	}
	if m, _, _ := unstructured.NestedString(p, "status", "health", "message"); m != "no pods" {
		t.Errorf("health message %q", m)
	}
	// A stock work agent reports the first condition only (a plain string).
	p = Patch(app, work(nil, "", map[string]string{"syncStatus": "Unknown", "healthStatus": "Healthy",
		"conditionTypes": "ComparisonError", "conditionMessages": "path does not exist"}))
	conds, _, _ = unstructured.NestedSlice(p, "status", "conditions")
	if len(conds) != 2 || conds[1].(map[string]any)["type"] != "ComparisonError" || conds[1].(map[string]any)["message"] != "path does not exist" {
		t.Errorf("first condition from a stock work agent: %v", conds)
	}

	// The work agent could not apply it: no feedback at all, and a condition says why.
	w = work(nil, "", nil)
	w.Namespace = "cluster1"
	w.Status.ResourceStatus.Manifests[0].Conditions = []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionFalse,
		Message: `applications.argoproj.io "a" is forbidden`, LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}}
	p = Patch(app, w)
	conds, _, _ = unstructured.NestedSlice(p, "status", "conditions")
	if len(conds) != 2 || conds[1].(map[string]any)["type"] != pullmodel.ConditionApplyError ||
		!strings.Contains(conds[1].(map[string]any)["message"].(string), "forbidden") || !strings.Contains(conds[1].(map[string]any)["message"].(string), "cluster1") {
		t.Errorf("apply failure: conditions %v", conds)
	}

	// Shown already: no write. Gone on the cluster: removed, the hub's own stays.
	app.Object["status"] = map[string]any{"conditions": conds}
	if p := Patch(app, w); p != nil {
		t.Errorf("conditions shown already, patched anyway: %v", p)
	}
	p = Patch(app, work(nil, "", nil))
	conds, _, _ = unstructured.NestedSlice(p, "status", "conditions")
	if len(conds) != 1 || conds[0].(map[string]any)["type"] != pullmodel.ConditionDeliveryError {
		t.Errorf("after the cluster's conditions went: %v", conds)
	}
}

// TestPatchMultiSourceRevisions: a multi-source Application's revisions come back in order when
// the work agent reports the list whole; from a stock work agent (first item only) none are
// written, since progressive sync would pin its syncs to a partial list.
func TestPatchMultiSourceRevisions(t *testing.T) {
	w := work(nil, "", map[string]string{"syncStatus": "Synced"})
	w.Status.ResourceStatus.Manifests[0].StatusFeedbacks.Values = append(w.Status.ResourceStatus.Manifests[0].StatusFeedbacks.Values,
		workv1.FeedbackValue{Name: "syncRevisions", Value: workv1.FieldValue{Type: workv1.JsonRaw, JsonRaw: ptr.To(`["aaa","bbb"]`)}})
	p := Patch(pullmodel.NewApplication(), w)
	revs, _, _ := unstructured.NestedStringSlice(p, "status", "sync", "revisions")
	if len(revs) != 2 || revs[0] != "aaa" || revs[1] != "bbb" {
		t.Errorf("revisions %v", revs)
	}
	app := pullmodel.NewApplication()
	app.Object["status"] = map[string]any{"sync": map[string]any{"status": "Synced", "revisions": []any{"aaa", "bbb"}}}
	p = Patch(app, work(nil, "", map[string]string{"syncStatus": "Synced", "syncRevisions": "aaa"}))
	if v, found, _ := unstructured.NestedFieldNoCopy(p, "status", "sync", "revisions"); !found || v != nil {
		t.Errorf("a partial list must remove the revisions (null), got %v (found %v)", v, found)
	}
}

// TestPatchShowsErrorsFedBackByType: a stock work agent's only listed condition is the first,
// here a warning; the error fed back by its own rules is shown beside it, whole up to the hub's
// message bound, in Argo CD's order, and an unchanged feedback patches nothing.
func TestPatchShowsErrorsFedBackByType(t *testing.T) {
	long := strings.Repeat("y", 3000)
	fb := map[string]string{"syncStatus": "OutOfSync", "healthStatus": "Healthy",
		"conditionTypes": "OrphanedResourceWarning", "conditionMessages": "orphans", "conditionTransitionTimes": "2026-01-01T00:00:00Z",
		"conditionSyncErrorMessage": long, "conditionSyncErrorTime": "2026-01-01T00:00:02Z",
		"conditionComparisonErrorMessage": "path does not exist"}
	app := pullmodel.NewApplication()
	p := Patch(app, work(nil, "", fb))
	conds, _ := p["status"].(map[string]any)["conditions"].([]any)
	var types []string
	for _, c := range conds {
		types = append(types, c.(map[string]any)["type"].(string))
	}
	if strings.Join(types, ",") != "ComparisonError,OrphanedResourceWarning,SyncError" {
		t.Fatalf("conditions %v", types)
	}
	syncErr := conds[2].(map[string]any)
	if msg := syncErr["message"].(string); !strings.HasPrefix(msg, "yyyy") || len(msg) > MaxMessageBytes || syncErr["lastTransitionTime"] != "2026-01-01T00:00:02Z" {
		t.Errorf("SyncError %d bytes, time %v", len(msg), syncErr["lastTransitionTime"])
	}
	if _, ok := conds[0].(map[string]any)["lastTransitionTime"]; ok {
		t.Error("a time made up for a condition fed back without one")
	}
	app.Object["status"] = p["status"]
	if p := Patch(app, work(nil, "", fb)); p != nil {
		t.Errorf("unchanged feedback patched: %v", p)
	}
	// The same type listed and fed back by type shows once, with the by-type message.
	fb["conditionTypes"], fb["conditionMessages"] = "ComparisonError", "path does not exist (listed)"
	p = Patch(app, work(nil, "", fb))
	conds, _ = p["status"].(map[string]any)["conditions"].([]any)
	if len(conds) != 2 || conds[0].(map[string]any)["message"] != "path does not exist" {
		t.Errorf("conditions %v", conds)
	}
}

// TestPatchShowsResources: the resource reporter's list becomes the hub Application's
// status.resources, within MaxResourcesBytes; a list that does not decode, or none, shows none.
func TestPatchShowsResources(t *testing.T) {
	items := [][5]string{{"apps", "v1", "Deployment", "guestbook", "guestbook-ui"}, {"", "v1", "Service", "guestbook", "guestbook-ui"}}
	raw, _ := json.Marshal(map[string]any{"total": 2, "items": items})
	fb := map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy", "resourceList": string(raw)}
	app := pullmodel.NewApplication()
	p := Patch(app, work(nil, "", fb))
	res, _ := p["status"].(map[string]any)["resources"].([]any)
	got, _ := json.Marshal(res)
	want := `[{"group":"apps","kind":"Deployment","name":"guestbook-ui","namespace":"guestbook","version":"v1"},{"kind":"Service","name":"guestbook-ui","namespace":"guestbook","version":"v1"}]`
	if string(got) != want {
		t.Fatalf("resources %s, want %s", got, want)
	}
	app.Object["status"] = p["status"]
	if p := Patch(app, work(nil, "", fb)); p != nil {
		t.Errorf("unchanged list patched: %v", p)
	}
	fb["resourceList"] = `{"total":1,"items":[["", "", "", "", ""]]}`
	p = Patch(app, work(nil, "", fb))
	if v, ok := p["status"].(map[string]any)["resources"]; !ok || v != nil {
		t.Errorf("a list that does not decode: resources %v (present %v), want removed", v, ok)
	}

	// A cluster's list is bounded where it is written (resourcelist.MaxBytes) and refused over
	// that bound; the hub's list of it stays within MaxResourcesBytes.
	many := make([]resourcelist.Resource, 0, 2000)
	for i := range 2000 {
		many = append(many, resourcelist.Resource{Group: "example.com", Version: "v1", Kind: "Widget", Namespace: "guestbook", Name: fmt.Sprintf("widget-%04d", i)})
	}
	fb["resourceList"] = resourcelist.Encode(many)
	listed, total, err := resourcelist.Decode(fb["resourceList"])
	if err != nil || total != 2000 || len(listed) >= 2000 {
		t.Fatalf("encoded %d of %d (%v)", len(listed), total, err)
	}
	p = Patch(pullmodel.NewApplication(), work(nil, "", fb))
	kept, _ := p["status"].(map[string]any)["resources"].([]any)
	size, _ := json.Marshal(kept)
	if len(kept) != len(listed) || len(size) > MaxResourcesBytes {
		t.Errorf("%d resources in %d bytes, want the %d listed within %d", len(kept), len(size), len(listed), MaxResourcesBytes)
	}
}

// TestPatchShowsTheProjectsApplyFailure: when the work agent cannot apply the ManifestWork of the
// Application's AppProject, the Application says so (OCMApplyError, "its AppProject"), and the
// condition goes once it could.
func TestPatchShowsTheProjectsApplyFailure(t *testing.T) {
	app := pullmodel.NewApplication()
	app.Object["status"] = map[string]any{"sync": map[string]any{"status": "Synced", "revision": nil, "revisions": nil}}
	w := work(nil, "", map[string]string{"syncStatus": "Synced"})
	project := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "team.appproject",
		Labels: map[string]string{pullmodel.LabelProjectWork: "true"}, Annotations: map[string]string{pullmodel.AnnotationHubProject: "team"}}}
	if p := PatchWithProject(app, w, project); p != nil {
		t.Fatalf("nothing to write, got %v", p)
	}
	project.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
		ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Resource: "appprojects", Namespace: "argocd", Name: "team"},
		Conditions:   []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionFalse, Message: "forbidden", LastTransitionTime: metav1.Now()}},
	}}
	p := PatchWithProject(app, w, project)
	conds, _, _ := unstructured.NestedSlice(p, "status", "conditions")
	if len(conds) != 1 || conds[0].(map[string]any)["type"] != pullmodel.ConditionApplyError || !strings.Contains(fmt.Sprint(conds[0].(map[string]any)["message"]), "its AppProject team: forbidden") {
		t.Fatalf("conditions %v", conds)
	}
	app.Object["status"].(map[string]any)["conditions"] = conds
	project.Status.ResourceStatus.Manifests[0].Conditions[0].Status = metav1.ConditionTrue
	p = PatchWithProject(app, w, project)
	if conds, found, _ := unstructured.NestedSlice(p, "status", "conditions"); !found || len(conds) != 0 {
		t.Errorf("once applied, conditions %v (found %v), want none", conds, found)
	}
}
