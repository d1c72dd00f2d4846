package pullmodel

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// TestMetadataIsReadInPlace: one label or annotation of an unstructured Application is read
// without copying them all, as GetAnnotations and GetLabels do at every call; a typed object
// reads the same values.
func TestMetadataIsReadInPlace(t *testing.T) {
	app := NewApplication()
	app.SetLabels(map[string]string{LabelPull: "true"})
	app.SetAnnotations(map[string]string{AnnotationCluster: " cluster-1 ", AnnotationRefresh: ""})
	work := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Labels: app.GetLabels(), Annotations: app.GetAnnotations()}}
	for _, o := range []metav1.Object{app, work} {
		if got := Label(o, LabelPull); got != "true" {
			t.Errorf("%T: label %q", o, got)
		}
		if got := TargetCluster(o); got != "cluster-1" {
			t.Errorf("%T: cluster %q", o, got)
		}
		if v, ok := LookupAnnotation(o, AnnotationRefresh); !ok || v != "" {
			t.Errorf("%T: an empty annotation read as %q, present %v", o, v, ok)
		}
		if v, ok := LookupAnnotation(o, AnnotationApplicationSet); ok || v != "" {
			t.Errorf("%T: a missing annotation read as %q, present %v", o, v, ok)
		}
	}
	none := NewApplication()
	if Label(none, LabelPull) != "" || Annotation(none, AnnotationCluster) != "" || Marked(none) {
		t.Error("an Application without labels or annotations reads values")
	}
	if n := testing.AllocsPerRun(100, func() { _ = Marked(app) }); n != 0 {
		t.Errorf("reading an Application's pull label and cluster allocated %v times", n)
	}
}

// TestSplitAppKeyInvertsAppKey: the filters that compare an AppKey's halves read the format
// AppKey writes, and a key with an empty half or a third part names no Application.
func TestSplitAppKeyInvertsAppKey(t *testing.T) {
	ns, name, ok := SplitAppKey(AppKey("team-a", "guestbook"))
	if !ok || ns != "team-a" || name != "guestbook" {
		t.Errorf("SplitAppKey(AppKey) = %q, %q, %v", ns, name, ok)
	}
	for _, key := range []string{"", "/", "team-a/", "/guestbook", "team-a", "team-a/guest/book"} {
		if _, _, ok := SplitAppKey(key); ok {
			t.Errorf("SplitAppKey(%q): ok, want not ok", key)
		}
	}
}
