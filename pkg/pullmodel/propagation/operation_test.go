package propagation

import (
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
	raw := `{"apiVersion":"argoproj.io/v1alpha1","kind":"Application","metadata":{"name":"guestbook","namespace":"team-a","uid":"0123456789",` +
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

// TestOperationBaselineTellsANewEqualRequest: RollingSync asks again with the very same request
// after the hub's was cleared. Whether the propagation controller saw the Application without
// an operation in between or not, the request is delivered anew (new baseline, new payload)
// once the spoke has run the old one and the hub shows that; before, the old one is kept.
func TestOperationBaselineTellsANewEqualRequest(t *testing.T) {
	first, err := Build(Input{App: appFromServer(t, ""), OperationBaseline: ""})
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]string{FeedbackOperationPhase: "Running", FeedbackOperationStarted: "S1"}
	done := map[string]string{FeedbackOperationPhase: "Succeeded", FeedbackOperationStarted: "S1", FeedbackOperationEnded: "S1"}
	shownRunning := `{"operationState":{"phase":"Running","startedAt":"S1"}}`
	shownDone := `{"operationState":{"phase":"Succeeded","startedAt":"S1"}}`
	for _, tc := range []struct {
		name, status string
		fb           map[string]string
		want         string
	}{
		{"not started yet", "", map[string]string{}, ""},
		{"running on the spoke", shownRunning, running, ""},
		{"finished, clear pending on the hub", shownRunning, done, ""},
		{"finished and shown: a new request", shownDone, done, "S1"},
	} {
		app := appFromServer(t, tc.status)
		have := withFeedback(first, tc.fb)
		if got := operationBaseline(app, have); got != tc.want {
			t.Errorf("%s: baseline %q, want %q", tc.name, got, tc.want)
		}
		want, err := Build(Input{App: app, OperationBaseline: operationBaseline(app, have)})
		if err != nil {
			t.Fatal(err)
		}
		if changed := NeedsUpdate(have, want); changed != (tc.want != "") {
			t.Errorf("%s: ManifestWork update %v, want %v", tc.name, changed, tc.want != "")
		}
		if tc.want != "" && jsonEqual(have.Spec.Workload.Manifests[0].Raw, want.Spec.Workload.Manifests[0].Raw) {
			t.Errorf("%s: the payload is unchanged: the work agent would not hand the request to the spoke again", tc.name)
		}
	}
}
