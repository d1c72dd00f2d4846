package manager

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/sharing"
)

// decoded stands for an object as the API server's decoder hands it to the cache: every
// string its own copy.
func decoded(name string) *corev1.ConfigMap {
	own := func(s string) string { return strings.Clone(s) }
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: own("cluster-1"),
		Labels:      map[string]string{own("apps.open-cluster-management.io/owner"): own("fleet")},
		Annotations: map[string]string{own("note"): own(strings.Repeat("x", sharing.MaxStringLength+1))},
		Finalizers:  []string{own("argocd-agent-addon.io/record")},
	}}
}

func sameBytes(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func onlyKey(m map[string]string) (string, string) {
	for k, v := range m {
		return k, v
	}
	return "", ""
}

func TestShareStringsSharesRepeatedMetadata(t *testing.T) {
	transform := shareStrings(nil)
	var objs []*corev1.ConfigMap
	for _, name := range []string{"a", "b"} {
		o, err := transform(decoded(name))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o.(*corev1.ConfigMap))
		// Objects enter the cache over many collections; sharing must outlast them.
		runtime.GC()
		runtime.GC()
	}
	a, b := objs[0], objs[1]
	ak, av := onlyKey(a.Labels)
	bk, bv := onlyKey(b.Labels)
	if !sameBytes(ak, bk) || !sameBytes(av, bv) || !sameBytes(a.Namespace, b.Namespace) || !sameBytes(a.Finalizers[0], b.Finalizers[0]) {
		t.Error("two objects' equal metadata strings are still two copies")
	}
	if _, av := onlyKey(a.Annotations); av != strings.Repeat("x", sharing.MaxStringLength+1) {
		t.Errorf("a long annotation value changed: %q", av)
	}
	if a.Labels["apps.open-cluster-management.io/owner"] != "fleet" || a.Name != "a" || b.Name != "b" || len(a.Labels) != 1 {
		t.Errorf("the metadata changed: %+v", a.ObjectMeta)
	}
}

func TestShareStringsRunsTheTransformFirst(t *testing.T) {
	failing := shareStrings(func(any) (any, error) { return nil, errors.New("refused") })
	if _, err := failing(decoded("a")); err == nil {
		t.Error("the wrapped transform's error was dropped")
	}
	trimmed, err := shareStrings(func(o any) (any, error) {
		o.(*corev1.ConfigMap).Labels = nil
		return o, nil
	})(decoded("a"))
	if err != nil || trimmed.(*corev1.ConfigMap).Labels != nil {
		t.Errorf("the wrapped transform's result was not kept: %v, %v", trimmed, err)
	}
	if o, err := shareStrings(nil)("not an object"); err != nil || o != "not an object" {
		t.Errorf("a value that is not an object came back as %v, %v", o, err)
	}
}

func TestShareStringsSharesRepeatedSmallMaps(t *testing.T) {
	transform := shareStrings(nil)
	withAnnotations := func(name string, annotations map[string]string) *corev1.ConfigMap {
		o := decoded(name)
		o.Annotations = annotations
		return o
	}
	a, _ := transform(withAnnotations("a", map[string]string{strings.Clone("skip-reconcile"): strings.Clone("true")}))
	b, _ := transform(withAnnotations("b", map[string]string{strings.Clone("skip-reconcile"): strings.Clone("true")}))
	// Entries that would read alike if joined without their lengths.
	c, _ := transform(withAnnotations("c", map[string]string{"k": "v\x00w\x00x"}))
	d, _ := transform(withAnnotations("d", map[string]string{"k": "v", "w": "x"}))
	ma, mb := a.(*corev1.ConfigMap).Annotations, b.(*corev1.ConfigMap).Annotations
	if reflect.ValueOf(ma).UnsafePointer() != reflect.ValueOf(mb).UnsafePointer() {
		t.Error("two objects' equal annotations are still two maps")
	}
	if ma["skip-reconcile"] != "true" || len(ma) != 1 {
		t.Errorf("shared annotations changed: %v", ma)
	}
	if got := c.(*corev1.ConfigMap).Annotations; len(got) != 1 || got["k"] != "v\x00w\x00x" {
		t.Errorf("annotations %q became %q", map[string]string{"k": "v\x00w\x00x"}, got)
	}
	if got := d.(*corev1.ConfigMap).Annotations; len(got) != 2 || got["k"] != "v" || got["w"] != "x" {
		t.Errorf("annotations %q became %q", map[string]string{"k": "v", "w": "x"}, got)
	}
	// A map with a long value is its object's own.
	e, _ := transform(decoded("e"))
	f, _ := transform(decoded("f"))
	if reflect.ValueOf(e.(*corev1.ConfigMap).Annotations).UnsafePointer() == reflect.ValueOf(f.(*corev1.ConfigMap).Annotations).UnsafePointer() {
		t.Error("maps holding a long value are shared")
	}
}

// TestShareStringsNeverWritesACachedObject: client-go runs the transform again on an object
// already in the cache when its informer resyncs, while event handlers read that object and
// the others that share its maps. The transform used to write the shared label map in place,
// and a predicate reading another Secret's labels crashed the manager with "concurrent map
// read and map write".
func TestShareStringsNeverWritesACachedObject(t *testing.T) {
	transform := shareStrings(nil)
	withoutLongAnnotation := func(name string) *corev1.ConfigMap {
		o := decoded(name)
		o.Annotations = map[string]string{strings.Clone("note"): strings.Clone("short")}
		return o
	}
	a, _ := transform(withoutLongAnnotation("a"))
	b, _ := transform(withoutLongAnnotation("b"))
	cached, other := a.(*corev1.ConfigMap), b.(*corev1.ConfigMap)
	if reflect.ValueOf(cached.Labels).UnsafePointer() != reflect.ValueOf(other.Labels).UnsafePointer() {
		t.Fatal("the two objects' equal labels are not one shared map: nothing to check")
	}
	labels, annotations, finalizers := cached.Labels, cached.Annotations, cached.Finalizers
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				_ = other.Labels["apps.open-cluster-management.io/owner"]
				_ = other.Annotations["note"]
			}
		}
	}()
	for range 20000 {
		if _, err := transform(cached); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	if reflect.ValueOf(cached.Labels).UnsafePointer() != reflect.ValueOf(labels).UnsafePointer() ||
		reflect.ValueOf(cached.Annotations).UnsafePointer() != reflect.ValueOf(annotations).UnsafePointer() ||
		unsafe.SliceData(cached.Finalizers) != unsafe.SliceData(finalizers) {
		t.Error("transforming a cached object again replaced its maps or finalizers")
	}
}
