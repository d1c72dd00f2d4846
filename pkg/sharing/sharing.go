// Package sharing keeps one copy of the strings and small JSON values that repeat across the
// objects of the manager's caches. Every object decoded from the API server carries its own
// copy of each of its strings and maps: a cache of many objects of one kind holds the same
// keys, label values and small sub-objects thousands of times. Cached objects are never
// changed in place (the caches' readers deep-copy them or only read), so they may share them.
package sharing

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"unsafe"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/bounded"
)

// MaxStringLength bounds the strings String shares: keys, names and states are short and
// repeat; a long message or document seldom does.
const MaxStringLength = 128

// String returns the one shared copy of s, or s itself when it is empty or longer than
// MaxStringLength.
func String(s string) string {
	if s == "" || len(s) > MaxStringLength {
		return s
	}
	return sharedStrings.LoadOrStore(s, s)
}

// Same reports whether a and b are the same copy of their bytes.
func Same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// sharedStrings holds the first copy of each string it is given. Go's unique package would drop a
// copy once no handle to it is left, so objects cached after the next collection would get
// copies of their own again; this table keeps them instead, up to maxStrings (a fleet needs one
// entry per cluster name and a few thousand more), past which it starts over, which only costs
// sharing.
var sharedStrings = bounded.NewMap[string, string](maxStrings)

const maxStrings = 1 << 16

// JSON returns a copy of v, a JSON value as Kubernetes' unstructured decoder makes it
// (map[string]any, []any, string, int64, float64, bool, nil), in which every key and short
// string is String's shared copy and every small object or list equal to one seen before is
// that one. v itself is never written: a cache's transform may be given an object the cache
// already holds.
func JSON(v any) any {
	out, _ := share(v)
	return out
}

// maxSharedValueKey bounds the encoded size of the objects and lists JSON shares whole: small
// ones (a health, a sync policy, one resource of a list) repeat across objects; a whole spec
// seldom does, and its key would cost what sharing saves.
const maxSharedValueKey = 256

// values holds the first copy of each small object or list, by its encoding.
var values = bounded.NewMap[string, any](maxValues)

const maxValues = 1 << 14

// stringValues holds each shared string as an interface value: a string held in an any costs
// a header of its own, which equal strings can share too.
var stringValues = bounded.NewMap[string, any](maxStrings)

// share returns v's shared copy and its key: an encoding that differs for any two values that
// differ, or "" when v is too large to be shared whole.
func share(v any) (any, string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make(map[string]any, len(x))
		key := []byte{'{'}
		for _, k := range keys {
			e, ek := share(x[k])
			out[String(k)] = e
			key = appendPart(key, k, ek)
		}
		return shareWhole(out, key)
	case []any:
		out := make([]any, len(x))
		key := []byte{'['}
		for i, e := range x {
			var ek string
			out[i], ek = share(e)
			key = appendPart(key, "", ek)
		}
		return shareWhole(out, key)
	case string:
		if len(x) > MaxStringLength {
			return x, ""
		}
		s := String(x)
		return stringValues.LoadOrStore(s, s), "s" + s
	case bool:
		return x, strconv.FormatBool(x)
	case int64:
		return x, "i" + strconv.FormatInt(x, 10)
	case float64:
		return x, "f" + strconv.FormatUint(math.Float64bits(x), 16)
	case nil:
		return nil, "n"
	}
	return v, ""
}

// appendPart appends one member (name and value's key) to a key being built, or marks the key
// unusable ("" key) once a member cannot be shared or the key grows too long.
func appendPart(key []byte, name, valueKey string) []byte {
	if key == nil || valueKey == "" || len(key)+len(name)+len(valueKey) > maxSharedValueKey {
		return nil
	}
	key = binary.AppendUvarint(key, uint64(len(name)))
	key = append(key, name...)
	key = binary.AppendUvarint(key, uint64(len(valueKey)))
	return append(key, valueKey...)
}

// shareWhole returns the held copy of v when its key is usable, and the key.
func shareWhole(v any, key []byte) (any, string) {
	if key == nil {
		return v, ""
	}
	k := string(key)
	return values.LoadOrStore(k, v), k
}

// Pointer returns a shared pointer to *p's shared copy when *p is short, else p: a typed
// object's optional strings are pointers, one allocation each.
func Pointer(p *string) *string {
	if p == nil || *p == "" || len(*p) > MaxStringLength {
		return p
	}
	s := String(*p)
	return pointers.LoadOrStore(s, &s)
}

// pointers holds one pointer to each shared string Pointer was given.
var pointers = bounded.NewMap[string, *string](maxStrings)
