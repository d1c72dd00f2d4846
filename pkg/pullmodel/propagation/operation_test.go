package propagation

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
)

// rollingSyncOperation is the sync request ApplicationSet RollingSync writes (Argo CD v3.6
// progressivesync.syncApplication).
const rollingSyncOperation = `{"initiatedBy":{"username":"applicationset-controller","automated":true},` +
	`"info":[{"name":"Reason","value":"ApplicationSet RollingSync triggered a sync of this Application resource"}],` +
	`"sync":{"revision":"abc123","prune":true,"syncOptions":["CreateNamespace=true"]},"retry":{"limit":5}}`

// appFromServer is the hub Application as a client reads it: integers as int64.
func appFromServer(t *testing.T, status string) *unstructured.Unstructured {
	t.Helper()
	raw := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"guestbook","namespace":"team-a","uid":"0123456789","resourceVersion":"100",` +
		`"labels":{"` + pullmodel.LabelPull + `":"true"},"annotations":{"` + pullmodel.AnnotationCluster + `":"c1","` + pullmodel.AnnotationSkipReconcile + `":"true"}},` +
		`"spec":{"project":"default","destination":{"namespace":"gb"}},"operation":` + rollingSyncOperation
	if status != "" {
		raw += `,"status":` + status
	}
	obj, _, err := unstructured.UnstructuredJSONScheme.Decode([]byte(raw+"}"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*unstructured.Unstructured)
}

func withFeedback(w *workv1.ManifestWork, fb map[string]string) *workv1.ManifestWork {
	w = w.DeepCopy()
	var vals []workv1.FeedbackValue
	for k, v := range fb {
		vals = append(vals, workv1.FeedbackValue{Name: k, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(v)}})
	}
	w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Resource: "applications"}, StatusFeedbacks: workv1.StatusFeedbackResult{Values: vals}}}
	return w
}

// TestSameOperationAcrossDecoders: the request read from the API server and the same request
// decoded from the ManifestWork's payload are the same (RollingSync's retry.limit is an int64
// on one side and a float64 on the other). Otherwise a RollingSync request would never be
// cleared on the hub and never asked for again.
func TestSameOperationAcrossDecoders(t *testing.T) {
	app := appFromServer(t, "")
	w, err := Build(Input{App: app})
	if err != nil {
		t.Fatal(err)
	}
	op, _ := app.Object["operation"].(map[string]any)
	if !SameOperation(Operation(w), op) {
		t.Fatalf("the delivered request differs from the hub's: %v vs %v", Operation(w), op)
	}
	other := appFromServer(t, "")
	_ = unstructured.SetNestedField(other.Object, int64(6), "operation", "retry", "limit")
	if SameOperation(Operation(w), other.Object["operation"].(map[string]any)) {
		t.Error("a different retry limit compares the same")
	}
}

// shownRun is a hub Application status that shows a finished run of the request named request.
func shownRun(phase, started, request string) string {
	return `{"operationState":{"phase":"` + phase + `","startedAt":"` + started + `","operation":{"info":[{"name":"` + pullmodel.OperationRequestInfo + `","value":"` + request + `"}]}}}`
}

// TestOperationRequestTellsANewEqualRequest: RollingSync asks again with the very same request
// after the hub's was cleared. Whether the propagation controller saw the Application without
// an operation in between or not, the request is delivered anew (new name, new payload) once
// the spoke has run the old one and the hub shows that; before, the old one is kept.
func TestOperationRequestTellsANewEqualRequest(t *testing.T) {
	first, err := Build(Input{App: appFromServer(t, ""), OperationRequest: "100"})
	if err != nil {
		t.Fatal(err)
	}
	if RequestName(OperationAsSent(first)) != "100" || first.Annotations[pullmodel.AnnotationOperationRequest] != "100" {
		t.Fatalf("the request is not named 100 in the payload and the annotation: %v %v", OperationAsSent(first), first.Annotations)
	}
	running := map[string]string{FeedbackOperationPhase: "Running", FeedbackOperationStarted: "S1", FeedbackOperationRequest: "100"}
	done := map[string]string{FeedbackOperationPhase: "Succeeded", FeedbackOperationStarted: "S1", FeedbackOperationEnded: "S1", FeedbackOperationRequest: "100"}
	ownRun := map[string]string{FeedbackOperationPhase: "Succeeded", FeedbackOperationStarted: "S1", FeedbackOperationEnded: "S1"}
	for _, tc := range []struct {
		name, status string
		fb           map[string]string
		want         string
	}{
		{"not started yet", "", map[string]string{}, "100"},
		{"running on the spoke", shownRun("Running", "S1", "100"), running, "100"},
		{"finished, clear pending on the hub", shownRun("Running", "S1", "100"), done, "100"},
		{"a run the spoke started by itself, shown", `{"operationState":{"phase":"Succeeded","startedAt":"S1","operation":{}}}`, ownRun, "100"},
		{"finished and shown: a new request", shownRun("Succeeded", "S1", "100"), done, "130"},
	} {
		app := appFromServer(t, tc.status)
		app.SetResourceVersion("130")
		have := withFeedback(first, tc.fb)
		if got := operationRequest(app, have); got != tc.want {
			t.Errorf("%s: request %q, want %q", tc.name, got, tc.want)
		}
		want, err := Build(Input{App: app, OperationRequest: operationRequest(app, have)})
		if err != nil {
			t.Fatal(err)
		}
		if changed := NeedsUpdate(have, want); changed != (tc.want != "100") {
			t.Errorf("%s: ManifestWork update %v, want %v", tc.name, changed, tc.want != "100")
		}
		if tc.want != "100" && jsonEqual(have.Spec.Workload.Manifests[0].Raw, want.Spec.Workload.Manifests[0].Raw) {
			t.Errorf("%s: the payload is unchanged: the work agent would not hand the request to the spoke again", tc.name)
		}
	}
}

// TestEqualRequestsRunWithinOneSecondAreTold: RollingSync asks three times with the same
// request and the spoke runs the last two within the same second. Each run is told by the name
// of the request it ran, so each request is cleared once run; told by start times, the third
// looked like the second's run, was never taken as run, and stayed on the hub for good.
func TestEqualRequestsRunWithinOneSecondAreTold(t *testing.T) {
	app := appFromServer(t, "")
	var have *workv1.ManifestWork
	for round, started := range []string{"2026-11-30T04:52:03Z", "2026-11-30T04:52:06Z", "2026-11-30T04:52:06Z"} {
		app.SetResourceVersion(fmt.Sprint(100 + 10*round))
		w, err := Build(Input{App: app, OperationRequest: operationRequest(app, have)})
		if err != nil {
			t.Fatal(err)
		}
		// The spoke runs what it was handed, and the work agent feeds the run back.
		fb := map[string]string{FeedbackOperationPhase: "Succeeded", FeedbackOperationStarted: started, FeedbackOperationEnded: started,
			FeedbackOperationRequest: RequestName(OperationAsSent(w))}
		have = withFeedback(w, fb)
		if !OperationRun(have, fb) || OperationShown(app, fb) {
			t.Fatalf("round %d: run %v, shown %v; want run and not yet shown (the status controller then clears it)", round+1, OperationRun(have, fb), OperationShown(app, fb))
		}
		// The status controller shows the run and clears the request; RollingSync, its step
		// still Pending, asks again at once.
		if err := unstructured.SetNestedField(app.Object, map[string]any{"phase": "Succeeded", "startedAt": started, "operation": OperationAsSent(have)}, "status", "operationState"); err != nil {
			t.Fatal(err)
		}
		app.SetResourceVersion(fmt.Sprint(105 + 10*round))
	}
}

// TestRequestsReadPastAFieldOfAnotherType: the requests of a manifest are read as the whole
// manifest decoded gave them: a field of another type (an operation that is not an object)
// leaves the refresh request readable.
func TestRequestsReadPastAFieldOfAnotherType(t *testing.T) {
	w := &workv1.ManifestWork{}
	w.Spec.Workload.Manifests = []workv1.Manifest{{}}
	w.Spec.Workload.Manifests[0].Raw = []byte(`{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","operation":"sync",` +
		`"metadata":{"annotations":{"` + pullmodel.AnnotationRefresh + `":"normal"}},"spec":{"project":"default"}}`)
	if v, ok := Refresh(w); !ok || v != "normal" {
		t.Errorf("refresh request %q (found %v), want normal", v, ok)
	}
	if op := OperationAsSent(w); op != nil {
		t.Errorf("operation %v, want none", op)
	}
}
