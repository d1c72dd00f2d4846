package sharing

import (
	"encoding/binary"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/bounded"
)

// ObjectMeta replaces obj's namespace, label keys and values, annotation keys and short values,
// and finalizers by their shared copies, and its small label and annotation maps by the one
// shared copy of an equal map. A cached object's namespace repeats a cluster's name, and its
// labels and annotations the same few keys, thousands of times over a fleet. What obj holds
// is never written: a field is set to a new map or slice when one of its strings changes, since
// the one it holds may be shared with other cached objects, and client-go runs a cache's
// transform again on an object the cache holds when its informer resyncs.
func ObjectMeta(obj metav1.Object) {
	if ns := obj.GetNamespace(); !Same(ns, String(ns)) {
		obj.SetNamespace(String(ns))
	}
	if m, changed := stringMap(obj.GetLabels()); changed {
		obj.SetLabels(m)
	}
	if m, changed := stringMap(obj.GetAnnotations()); changed {
		obj.SetAnnotations(m)
	}
	if f, changed := stringSlice(obj.GetFinalizers()); changed {
		obj.SetFinalizers(f)
	}
}

// Keys returns m with the shared copies of its keys and its values as they are, for maps whose
// values are one object's own. m is never written.
func Keys(m map[string]string) map[string]string {
	for k := range m {
		if !Same(k, String(k)) {
			out := make(map[string]string, len(m))
			for k, v := range m {
				out[String(k)] = v
			}
			return out
		}
	}
	return m
}

// stringMap returns m with shared keys and values, the one shared copy of the whole map where
// sharedMaps keeps one, and whether that differs from m. m is never written.
func stringMap(m map[string]string) (map[string]string, bool) {
	if len(m) == 0 {
		return m, false
	}
	changed := false
	for k, v := range m {
		if !Same(k, String(k)) || !Same(v, String(v)) {
			changed = true
			break
		}
	}
	out := m
	if changed {
		out = make(map[string]string, len(m))
		for k, v := range m {
			out[String(k)] = String(v)
		}
	}
	out = sharedMap(out)
	return out, reflect.ValueOf(out).UnsafePointer() != reflect.ValueOf(m).UnsafePointer()
}

// stringSlice returns s with shared strings, a new slice if any changes; s is never written.
func stringSlice(s []string) ([]string, bool) {
	for i, v := range s {
		if !Same(v, String(v)) {
			out := slices.Clone(s)
			for j := i; j < len(out); j++ {
				out[j] = String(out[j])
			}
			return out, true
		}
	}
	return s, false
}

// sharedMap returns one shared copy of each small map of short strings. Whole label and
// annotation maps repeat too: every agent cluster secret carries the same annotations, every
// pull-model ManifestWork the same labels, and each copy is a map of its own (about 300 bytes
// for a few entries).
func sharedMap(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > maxSharedMapLength {
		return m
	}
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		if len(k) > MaxStringLength || len(v) > MaxStringLength {
			return m
		}
		keys = append(keys, k)
		size += len(k) + len(v)
	}
	slices.Sort(keys)
	// Each string after its length, so that no two maps read as the same key.
	b := make([]byte, 0, size+4*len(m))
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(m[k])))
		b = append(b, m[k]...)
	}
	return sharedMaps.LoadOrStore(string(b), m)
}

// maxSharedMapLength bounds the maps sharedMap shares: a map of more entries seldom repeats
// whole.
const maxSharedMapLength = 8

// sharedMaps holds the first copy of each map sharedMap is given, keyed by its entries, up to
// maxSharedMaps. Maps that name one object are one per object and fill it; it then starts
// over, which costs one more copy of each map that repeats. Kept small, so that its keys for
// the maps that do not repeat cost little.
var sharedMaps = bounded.NewMap[string, map[string]string](maxSharedMaps)

const maxSharedMaps = 1 << 10
