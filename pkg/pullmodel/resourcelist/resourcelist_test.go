package resourcelist

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func appWithResources(items ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"resources": items}}}
}

func TestRoundTrip(t *testing.T) {
	app := appWithResources(
		map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "guestbook", "name": "guestbook-ui", "status": "Synced", "health": map[string]any{"status": "Healthy"}},
		map[string]any{"version": "v1", "kind": "Service", "namespace": "guestbook", "name": "guestbook-ui"},
		map[string]any{"version": "v1", "kind": "Service"}, // no name: not an object
		"not a map",
	)
	got, total, err := Decode(Wanted(app))
	if err != nil {
		t.Fatal(err)
	}
	want := []Resource{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "guestbook", Name: "guestbook-ui"},
		{Version: "v1", Kind: "Service", Namespace: "guestbook", Name: "guestbook-ui"},
	}
	if total != 2 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("decoded %v (total %d), want %v", got, total, want)
	}
	if got[0].APIVersion() != "apps/v1" || got[1].APIVersion() != "v1" {
		t.Fatalf("apiVersions %q %q", got[0].APIVersion(), got[1].APIVersion())
	}
	if Wanted(appWithResources()) != "" {
		t.Fatal("an Application without resources must carry no annotation")
	}
}

// Health and sync changes must not change the annotation: each change would cost a write on the
// cluster, a ManifestWork status write and a report write on the hub.
func TestOnlyTheSetOfObjectsCounts(t *testing.T) {
	a := appWithResources(map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "n", "name": "d", "status": "OutOfSync", "health": map[string]any{"status": "Progressing"}})
	b := appWithResources(map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "n", "name": "d", "status": "Synced", "health": map[string]any{"status": "Healthy"}})
	if Wanted(a) != Wanted(b) {
		t.Fatalf("%q != %q", Wanted(a), Wanted(b))
	}
}

func TestLongListsKeepTheirFirstObjectsAndCount(t *testing.T) {
	var many []Resource
	for i := range 2000 {
		many = append(many, Resource{Version: "v1", Kind: "ConfigMap", Namespace: "team", Name: fmt.Sprintf("config-%04d", i)})
	}
	s := Encode(many)
	if len(s) > MaxBytes {
		t.Fatalf("encoded %d bytes, more than %d", len(s), MaxBytes)
	}
	got, total, err := Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	if total != 2000 || len(got) == 0 || len(got) >= 2000 || got[0] != many[0] || got[len(got)-1] != many[len(got)-1] {
		t.Fatalf("kept %d of total %d", len(got), total)
	}
	t.Logf("%d of 2000 objects fit %d bytes", len(got), MaxBytes)
}

// The value comes from a managed cluster: anything but what the reporter writes is refused.
func TestDecodeRefusesWhatNoReporterWrites(t *testing.T) {
	long := strings.Repeat("a", 254)
	for name, s := range map[string]string{
		"not JSON":        "Deployment/x",
		"unknown field":   `{"total":1,"items":[["","v1","Service","n","s"]],"extra":1}`,
		"short item":      `{"total":1,"items":[["","v1","Service","n"]]}`,
		"more than total": `{"total":0,"items":[["","v1","Service","n","s"]]}`,
		"no kind":         `{"total":1,"items":[["","v1","","n","s"]]}`,
		"no version":      `{"total":1,"items":[["","","Service","n","s"]]}`,
		"long name":       `{"total":1,"items":[["","v1","Service","n","` + long + `"]]}`,
		"too large":       `{"total":1,"items":[["","v1","Service","n","s"]]}` + strings.Repeat(" ", MaxBytes),
	} {
		if got, _, err := Decode(s); err == nil {
			t.Errorf("%s: decoded %v, want an error", name, got)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode([]Resource{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "n", Name: "d"}}))
	f.Add(`{"total":3,"items":[]}`)
	f.Fuzz(func(t *testing.T, s string) {
		got, total, err := Decode(s)
		if err != nil {
			return
		}
		if len(got) > total {
			t.Fatalf("%d items with total %d", len(got), total)
		}
		// What decodes encodes back within the bound.
		if len(Encode(got)) > MaxBytes {
			t.Fatalf("re-encoded past the bound")
		}
	})
}

// TestTrimApplicationKeepsWhatTheReporterReads: the cache's copy keeps the metadata and the
// objects' identities, so the annotation computed from it is the one computed from the whole
// Application, and drops the rest of the status.
func TestTrimApplicationKeepsWhatTheReporterReads(t *testing.T) {
	app := appWithResources(
		map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "n", "name": "d", "status": "Synced", "health": map[string]any{"status": "Healthy", "message": "ok"}},
	)
	app.SetAPIVersion("argoproj.io/v1alpha1")
	app.SetKind("Application")
	app.SetName("a")
	app.SetAnnotations(map[string]string{"k": "v"})
	app.Object["spec"] = map[string]any{"project": "default"}
	app.Object["status"].(map[string]any)["history"] = []any{map[string]any{"revision": "abc"}}
	want := Wanted(app)
	out, err := TrimApplication(app.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmed := out.(*unstructured.Unstructured)
	if Wanted(trimmed) != want || trimmed.GetName() != "a" || trimmed.GetAnnotations()["k"] != "v" || trimmed.GetKind() != "Application" {
		t.Fatalf("trimmed %v", trimmed.Object)
	}
	if _, ok := trimmed.Object["spec"]; ok {
		t.Error("spec kept")
	}
	if _, ok := trimmed.Object["status"].(map[string]any)["history"]; ok {
		t.Error("status.history kept")
	}
	if r := trimmed.Object["status"].(map[string]any)["resources"].([]any)[0].(map[string]any); r["health"] != nil || r["status"] != nil {
		t.Errorf("a resource's sync and health kept: %v", r)
	}
}
