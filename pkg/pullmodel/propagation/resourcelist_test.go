package propagation

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/jsonpath"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
)

// readAsWorkAgent reads a feedback path from an object as OCM's work agent does (v1.2.1,
// statusfeedback/reader.go: missing keys allowed, the first result only).
func readAsWorkAgent(t *testing.T, path string, obj map[string]any) (string, bool) {
	t.Helper()
	v, n := readAllAsWorkAgent(t, path, obj)
	return v, n > 0
}

// readAllAsWorkAgent is readAsWorkAgent that also says how many values the path found: with
// more than one, a work agent with the RawFeedbackJsonString gate reports them as a JSON list,
// bounded to 1,024 bytes; with one, every work agent reports that value as a plain string.
func readAllAsWorkAgent(t *testing.T, path string, obj map[string]any) (string, int) {
	t.Helper()
	j := jsonpath.New("feedback").AllowMissingKeys(true)
	if err := j.Parse("{" + path + "}"); err != nil {
		t.Fatalf("OCM cannot parse %s: %v", path, err)
	}
	results, err := j.FindResults(obj)
	if err != nil {
		t.Fatalf("OCM reports an error for %s: %v", path, err)
	}
	if len(results) == 0 || len(results[0]) == 0 {
		return "", 0
	}
	return fmt.Sprint(results[0][0].Interface()), len(results[0])
}

// TestResourceListIsFedBackForEveryApplication: every delivered Application feeds back its
// resource list (the hub Application's status.resources shows it, ApplicationSet or not), and
// its spoke Application carries the reporter's mark.
func TestResourceListIsFedBackForEveryApplication(t *testing.T) {
	ruleOf := func(owned bool) (string, bool) {
		app := hubApp()
		if owned {
			app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "set", UID: "u"}})
		}
		w, err := Build(Input{App: app})
		if err != nil {
			t.Fatal(err)
		}
		var spoke map[string]any
		if err := json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &spoke); err != nil {
			t.Fatal(err)
		}
		if labels, _, _ := unstructured.NestedStringMap(spoke, "metadata", "labels"); labels[resourcelist.LabelReported] != "true" {
			t.Errorf("spoke Application (ApplicationSet %v) labels %v: no %s", owned, labels, resourcelist.LabelReported)
		}
		for _, p := range w.Spec.ManifestConfigs[0].FeedbackRules[0].JsonPaths {
			if p.Name == FeedbackResourceList {
				return p.Path, true
			}
		}
		return "", false
	}
	if _, ok := ruleOf(false); !ok {
		t.Error("an Application without an ApplicationSet does not feed back its resource list")
	}
	path, ok := ruleOf(true)
	if !ok {
		t.Fatal("an ApplicationSet's Application does not feed back its resource list")
	}
	// The annotation's key has dots and a slash: the path must read it as one key.
	const value = `{"total":1,"items":[["apps","v1","Deployment","n","d"]]}`
	spoke := map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		pullmodel.AnnotationResourceList: value, "apps.open-cluster-management.io/other": "x"}}}
	if got, found := readAsWorkAgent(t, path, spoke); !found || got != value {
		t.Fatalf("%s read %q (found %v), want the annotation", path, got, found)
	}
	// A cluster without a reporter: no value and no error (an error would turn the whole
	// feedback condition False).
	if got, found := readAsWorkAgent(t, path, map[string]any{"metadata": map[string]any{"name": "x"}}); found {
		t.Fatalf("read %q from an Application without the annotation", got)
	}
}

// TestErrorConditionsAreFedBackByType: each error condition type has its own rules, which
// select the spoke's condition of that type wherever Argo CD sorted it (after a warning here),
// as one value (so no gate and no JSON bound apply to it, however long its message), and
// yield nothing, without an error, when the spoke has no such condition.
func TestErrorConditionsAreFedBackByType(t *testing.T) {
	w, err := Build(Input{App: hubApp()})
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, p := range w.Spec.ManifestConfigs[0].FeedbackRules[0].JsonPaths {
		paths[p.Name] = p.Path
	}
	long := strings.Repeat("x", 4000)
	spoke := map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "OrphanedResourceWarning", "message": "orphans", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		map[string]any{"type": "SharedResourceWarning", "message": "shared", "lastTransitionTime": "2026-01-01T00:00:01Z"},
		map[string]any{"type": "SyncError", "message": long, "lastTransitionTime": "2026-01-01T00:00:02Z"},
	}}}
	for _, ct := range ErrorConditionTypes {
		for _, name := range []string{FeedbackErrorMessage(ct), FeedbackErrorTime(ct)} {
			if paths[name] == "" {
				t.Fatalf("no feedback rule %s", name)
			}
		}
	}
	if got, n := readAllAsWorkAgent(t, paths[FeedbackErrorMessage("SyncError")], spoke); n != 1 || got != long {
		t.Errorf("SyncError message: %d values, %d bytes; want its whole message as one value", n, len(got))
	}
	if got, n := readAllAsWorkAgent(t, paths[FeedbackErrorTime("SyncError")], spoke); n != 1 || got != "2026-01-01T00:00:02Z" {
		t.Errorf("SyncError time: %d values, %q", n, got)
	}
	// The list rule's first value is the warning: what a stock work agent feeds back.
	if got, _ := readAsWorkAgent(t, paths[FeedbackConditionTypes], spoke); got != "OrphanedResourceWarning" {
		t.Errorf("first condition %q", got)
	}
	for _, ct := range []string{"ComparisonError", "InvalidSpecError"} {
		if got, found := readAsWorkAgent(t, paths[FeedbackErrorMessage(ct)], spoke); found {
			t.Errorf("%s read %q from an Application without it", ct, got)
		}
	}
	if got, found := readAsWorkAgent(t, paths[FeedbackErrorMessage("SyncError")], map[string]any{"status": map[string]any{}}); found {
		t.Errorf("read %q from an Application without conditions", got)
	}
}
