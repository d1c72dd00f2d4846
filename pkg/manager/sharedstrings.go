package manager

import (
	"encoding/binary"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/bounded"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/sharing"
)

// shareStrings runs transform, then replaces the object's namespace, label keys and values,
// annotation keys and short values, and finalizers by one shared copy of each string. Every
// object decoded from the API server carries its own copy of each of them: at 10,000
// clusters the cache holds some 60,000 objects whose labels repeat the same few keys and
// owner names, and whose namespaces repeat the cluster names.
func shareStrings(transform toolscache.TransformFunc) toolscache.TransformFunc {
	return func(o any) (any, error) {
		if transform != nil {
			var err error
			if o, err = transform(o); err != nil {
				return nil, err
			}
		}
		obj, ok := o.(metav1.Object)
		if !ok {
			return o, nil
		}
		// client-go runs the transform again on an object already in the cache when it resyncs
		// (a Sync delta carries the indexer's object), while event handlers read that object:
		// nothing here writes to what the object holds unless it changes it, and a map or slice
		// is replaced, never written, since the cached one may be shared with other objects.
		if ns := obj.GetNamespace(); !sharing.Same(ns, sharing.String(ns)) {
			obj.SetNamespace(sharing.String(ns))
		}
		if m, changed := shareMap(obj.GetLabels()); changed {
			obj.SetLabels(m)
		}
		if m, changed := shareMap(obj.GetAnnotations()); changed {
			obj.SetAnnotations(m)
		}
		if f, changed := shareSlice(obj.GetFinalizers()); changed {
			obj.SetFinalizers(f)
		}
		return o, nil
	}
}

// shareMap returns m with shared keys and values, the one shared copy of the whole map where
// sharedMap keeps one, and whether that differs from m. m is never written.
func shareMap(m map[string]string) (map[string]string, bool) {
	if len(m) == 0 {
		return m, false
	}
	changed := false
	for k, v := range m {
		if !sharing.Same(k, sharing.String(k)) || !sharing.Same(v, sharing.String(v)) {
			changed = true
			break
		}
	}
	out := m
	if changed {
		out = make(map[string]string, len(m))
		for k, v := range m {
			out[sharing.String(k)] = sharing.String(v)
		}
	}
	out = sharedMap(out)
	return out, reflect.ValueOf(out).UnsafePointer() != reflect.ValueOf(m).UnsafePointer()
}

// shareSlice returns s with shared strings, a new slice if any changes; s is never written.
func shareSlice(s []string) ([]string, bool) {
	for i, v := range s {
		if !sharing.Same(v, sharing.String(v)) {
			out := slices.Clone(s)
			for j := i; j < len(out); j++ {
				out[j] = sharing.String(out[j])
			}
			return out, true
		}
	}
	return s, false
}

// sharedMap returns one shared copy of each small map of short strings. Whole label and
// annotation maps repeat too: every agent cluster secret carries the same annotations, every
// probe the same labels, and each copy is a map of its own (about 300 bytes for a few entries).
// No code changes a cached object in place, however it read it (a deep copy, a list without
// copies, an event handler's object), so cached objects may share a map as they share its
// strings.
func sharedMap(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > maxSharedMapLength {
		return m
	}
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		if len(k) > sharing.MaxStringLength || len(v) > sharing.MaxStringLength {
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
// maxSharedMaps. Maps that name a cluster are one per object and fill it; it then starts over,
// which costs one more copy of each map that repeats. Kept small, so that its keys for the maps
// that do not repeat cost little.
var sharedMaps = bounded.NewMap[string, map[string]string](maxSharedMaps)

const maxSharedMaps = 1 << 10
