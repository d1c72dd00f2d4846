package pullmodel_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/sharing"
)

// hubApplication is a hub Application of an ApplicationSet as the pull model keeps it once its
// cluster reported: health, sync, conditions, resources and a finished sync.
func hubApplication(i int) *unstructured.Unstructured {
	app := pullmodel.NewApplication()
	app.SetNamespace("argocd")
	app.SetName(fmt.Sprintf("app-%05d", i))
	app.SetUID("0b7d9c1e-3f6a-4e2b-9a1c-5d8e7f6a4b3c")
	app.SetResourceVersion("123456")
	app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
	app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: fmt.Sprintf("cluster-%04d", i%500), pullmodel.AnnotationSkipReconcile: "true"})
	app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "apps", UID: "0b7d9c1e-3f6a-4e2b-9a1c-5d8e7f6a4b3d"}})
	app.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "argocd-applicationset-controller", Operation: metav1.ManagedFieldsOperationUpdate}})
	app.Object["spec"] = map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": "https://git.example/apps", "path": fmt.Sprintf("apps/%d", i), "targetRevision": "main"},
		"destination": map[string]any{"server": pullmodel.InClusterServer, "namespace": "apps"},
		"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true}},
	}
	name := fmt.Sprintf("app-%05d", i)
	app.Object["status"] = map[string]any{
		"sync":         map[string]any{"status": "Synced", "revision": "0123456789abcdef"},
		"health":       map[string]any{"status": "Healthy"},
		"reconciledAt": "2026-01-01T00:00:00Z",
		"conditions":   []any{map[string]any{"type": "OrphanedResourceWarning", "message": "Application has 1 orphaned resources", "lastTransitionTime": "2026-01-01T00:00:00Z"}},
		"resources": []any{
			map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "apps", "name": name},
			map[string]any{"version": "v1", "kind": "Service", "namespace": "apps", "name": name},
			map[string]any{"version": "v1", "kind": "ConfigMap", "namespace": "apps", "name": name + "-settings"},
		},
		"operationState": map[string]any{"phase": "Succeeded", "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z", "message": "successfully synced (all tasks run)",
			"operation": map[string]any{"sync": map[string]any{"revision": "main", "syncStrategy": map[string]any{"hook": map[string]any{}}}, "initiatedBy": map[string]any{"automated": true}}},
	}
	return app
}

// hubWork is the ManifestWork of hubApplication(i) with the status OCM's work agent gives it.
func hubWork(t testing.TB, i int) *workv1.ManifestWork {
	w, err := propagation.Build(propagation.Input{App: hubApplication(i)})
	if err != nil {
		t.Fatal(err)
	}
	w.UID, w.ResourceVersion = "0b7d9c1e-3f6a-4e2b-9a1c-5d8e7f6a4b3c", "1234"
	w.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "work-agent", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}}
	var values []workv1.FeedbackValue
	for _, p := range w.Spec.ManifestConfigs[0].FeedbackRules[0].JsonPaths {
		values = append(values, workv1.FeedbackValue{Name: p.Name, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To("Healthy")}})
	}
	at := metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete", Message: "Apply manifest work complete", LastTransitionTime: at, ObservedGeneration: 1}}
	w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
		ResourceMeta:    workv1.ManifestResourceMeta{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application", Resource: "applications", Namespace: "argocd", Name: fmt.Sprintf("app-%05d", i)},
		StatusFeedbacks: workv1.StatusFeedbackResult{Values: values},
		Conditions:      []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestComplete", Message: "Apply manifest complete", LastTransitionTime: at}},
	}}
	return w
}

// decodeApplication and decodeWork decode o's JSON as the cache's informers do: every string
// and map the decoded object's own.
func decodeApplication(t testing.TB, raw []byte) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return u
}

func decodeWork(t testing.TB, raw []byte) *workv1.ManifestWork {
	w := &workv1.ManifestWork{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, w); err != nil {
		t.Fatal(err)
	}
	return w
}

func mustJSON(t testing.TB, o any) []byte {
	raw, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestCompactApplicationKeepsEveryValueAndSharesWhatRepeats(t *testing.T) {
	var compacted []*unstructured.Unstructured
	for i := range 2 {
		in := decodeApplication(t, mustJSON(t, hubApplication(i)))
		before := mustJSON(t, in)
		o, err := pullmodel.CompactApplication(in)
		if err != nil {
			t.Fatal(err)
		}
		out := o.(*unstructured.Unstructured)
		if got := mustJSON(t, in); string(got) != string(before) {
			t.Fatal("the transform changed the object it was given")
		}
		want := in.DeepCopy()
		want.SetManagedFields(nil)
		unstructured.RemoveNestedField(want.Object, "metadata", "generation")
		unstructured.RemoveNestedField(want.Object, "metadata", "creationTimestamp")
		if !equality.Semantic.DeepEqual(out.Object, want.Object) {
			t.Fatalf("the compacted Application differs:\n%s\nwant\n%s", mustJSON(t, out), mustJSON(t, want))
		}
		// Another collection between two objects' arrival: the sharing must outlast it.
		runtime.GC()
		compacted = append(compacted, out)
	}
	a, b := compacted[0].Object, compacted[1].Object
	health := func(o map[string]any) map[string]any {
		return o["status"].(map[string]any)["health"].(map[string]any)
	}
	if reflect.ValueOf(health(a)).UnsafePointer() != reflect.ValueOf(health(b)).UnsafePointer() {
		t.Error("two Applications' equal health is two maps")
	}
	source := func(o map[string]any) map[string]any { return o["spec"].(map[string]any)["source"].(map[string]any) }
	if reflect.ValueOf(source(a)).UnsafePointer() == reflect.ValueOf(source(b)).UnsafePointer() {
		t.Error("two Applications' different sources are one map")
	}
	if !sameStrings(source(a)["repoURL"].(string), source(b)["repoURL"].(string)) {
		t.Error("two Applications' equal repository URLs are two strings")
	}
}

func TestCompactWorkKeepsEveryValueAndSharesWhatRepeats(t *testing.T) {
	var compacted []*workv1.ManifestWork
	for i := range 2 {
		in := decodeWork(t, mustJSON(t, hubWork(t, i)))
		before := mustJSON(t, in)
		o, err := pullmodel.CompactWork(in)
		if err != nil {
			t.Fatal(err)
		}
		out := o.(*workv1.ManifestWork)
		if got := mustJSON(t, in); string(got) != string(before) {
			t.Fatal("the transform changed the object it was given")
		}
		want := in.DeepCopy()
		want.ManagedFields = nil
		if !equality.Semantic.DeepEqual(out, want) {
			t.Fatalf("the compacted ManifestWork differs:\n%s\nwant\n%s", mustJSON(t, out), mustJSON(t, want))
		}
		runtime.GC()
		compacted = append(compacted, out)
	}
	a, b := compacted[0], compacted[1]
	if unsafe.SliceData(a.Spec.ManifestConfigs[0].FeedbackRules) != unsafe.SliceData(b.Spec.ManifestConfigs[0].FeedbackRules) {
		t.Error("two ManifestWorks' equal feedback rules are two copies")
	}
	if a.Spec.ManifestConfigs[0].ResourceIdentifier.Name == b.Spec.ManifestConfigs[0].ResourceIdentifier.Name {
		t.Fatal("the two ManifestWorks carry one Application: nothing to check")
	}
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two ManifestWorks' equal labels are two maps")
	}
	if !sameStrings(a.Namespace, sharing.String(strings.Clone(a.Namespace))) {
		t.Error("a ManifestWork's namespace is a copy of its own")
	}
	// An annotation value names one Application: it must not fill the shared table.
	if name := a.Annotations[pullmodel.AnnotationHubAppName]; name == "" || sameStrings(name, sharing.String(strings.Clone(name))) {
		t.Errorf("the ManifestWork's Application name %q went into the shared table", name)
	}
	va, vb := a.Status.ResourceStatus.Manifests[0].StatusFeedbacks.Values[0], b.Status.ResourceStatus.Manifests[0].StatusFeedbacks.Values[0]
	if !sameStrings(va.Name, vb.Name) || va.Value.String != vb.Value.String {
		t.Error("two ManifestWorks' equal feedback names and values are copies each")
	}
}

// A delivered Application's metadata as the API server sends it (this one: ten keys) may have
// more than eight keys; the cache keeps at most eight of them, so that each Application's metadata map is one group of Go's map
// (a ninth key doubles it).
func TestCompactApplicationMetadataFitsOneMapGroup(t *testing.T) {
	app := hubApplication(1)
	app.SetFinalizers([]string{"pull.open-cluster-management.io/cleanup"})
	app.SetGeneration(7)
	app.SetCreationTimestamp(metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in := decodeApplication(t, mustJSON(t, app))
	if n := len(in.Object["metadata"].(map[string]any)); n <= 8 {
		t.Fatalf("the Application's metadata has %d keys: nothing to check", n)
	}
	o, err := pullmodel.CompactApplication(in)
	if err != nil {
		t.Fatal(err)
	}
	out := o.(*unstructured.Unstructured)
	if n := len(out.Object["metadata"].(map[string]any)); n > 8 {
		t.Errorf("the cached Application's metadata has %d keys, want at most 8: %v", n, slices.Sorted(maps.Keys(out.Object["metadata"].(map[string]any))))
	}
	// What the pull model reads is kept.
	if out.GetName() != app.GetName() || out.GetNamespace() != app.GetNamespace() || out.GetUID() != app.GetUID() || out.GetResourceVersion() != app.GetResourceVersion() ||
		!slices.Equal(out.GetFinalizers(), app.GetFinalizers()) || !maps.Equal(out.GetLabels(), app.GetLabels()) || !maps.Equal(out.GetAnnotations(), app.GetAnnotations()) ||
		len(out.GetOwnerReferences()) != 1 {
		t.Errorf("the cached Application's metadata lost a field the pull model reads: %v", out.Object["metadata"])
	}
	// Allocated with room for what it keeps: a map sized for the keys dropped would take two
	// groups all the same.
	held := make([]any, 1000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range held {
		held[i] = pullmodel.CompactMetadata(in.Object["metadata"].(map[string]any))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(held)
	if per := (after.HeapAlloc - before.HeapAlloc) / uint64(len(held)); per > 400 {
		t.Errorf("each cached Application's metadata map holds %d bytes, want at most 400 (one map group)", per)
	}
}

func sameStrings(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// BenchmarkCachedPullObjectRetained reports what the pull model's cache holds per hub
// Application and per ManifestWork, decoded as the informers decode them, with and without the
// cache's transforms: 5,000 of each held, the heap measured after a collection.
func BenchmarkCachedPullObjectRetained(b *testing.B) {
	const n = 5000
	apps, works := make([][]byte, n), make([][]byte, n)
	for i := range n {
		apps[i], works[i] = mustJSON(b, hubApplication(i)), mustJSON(b, hubWork(b, i))
	}
	retained := func(unit string, decode func(i int) any) {
		held := make([]any, n)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range held {
			held[i] = decode(i)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, unit)
		runtime.KeepAlive(held)
	}
	must := func(o any, err error) any {
		if err != nil {
			b.Fatal(err)
		}
		return o
	}
	for b.Loop() {
		retained("decoded-B/app", func(i int) any { return decodeApplication(b, apps[i]) })
		retained("cached-B/app", func(i int) any { return must(pullmodel.CompactApplication(decodeApplication(b, apps[i]))) })
		retained("decoded-B/work", func(i int) any { return decodeWork(b, works[i]) })
		retained("cached-B/work", func(i int) any { return must(pullmodel.CompactWork(decodeWork(b, works[i]))) })
	}
}

// BenchmarkCompactApplication is the cache transform's cost per hub Application event.
func BenchmarkCompactApplication(b *testing.B) {
	const n = 1000
	decoded := make([]*unstructured.Unstructured, n)
	for i := range n {
		decoded[i] = decodeApplication(b, mustJSON(b, hubApplication(i)))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := pullmodel.CompactApplication(decoded[i%n]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
