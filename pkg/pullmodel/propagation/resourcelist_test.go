package propagation

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/jsonpath"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
)

// readAsWorkAgent reads a feedback path from an object as OCM's work agent does (v1.2.1,
// statusfeedback/reader.go: missing keys allowed, the first result only).
func readAsWorkAgent(t *testing.T, path string, obj map[string]any) (string, bool) {
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
		return "", false
	}
	return fmt.Sprint(results[0][0].Interface()), true
}

func TestResourceListIsFedBackForApplicationSetsOnly(t *testing.T) {
	ruleOf := func(owned bool) (string, bool) {
		app := hubApp()
		if owned {
			app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "set", UID: "u"}})
		}
		w, err := Build(Input{App: app})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range w.Spec.ManifestConfigs[0].FeedbackRules[0].JsonPaths {
			if p.Name == FeedbackResourceList {
				return p.Path, true
			}
		}
		return "", false
	}
	if _, ok := ruleOf(false); ok {
		t.Error("an Application without an ApplicationSet feeds back its resource list (no report reads it)")
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
