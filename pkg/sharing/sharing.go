// Package sharing keeps one copy of the strings and small JSON values that repeat across the
// objects of the manager's caches. Every object decoded from the API server carries its own
// copy of each of its strings and maps: a cache of many objects of one kind holds the same
// keys, label values and small sub-objects thousands of times. Cached objects are never
// changed in place (the caches' readers deep-copy them or only read), so they may share them.
package sharing

import (
	"hash/maphash"
	"math"
	"reflect"
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
	out, _, _ := share(v)
	return out
}

// maxSharedValueSize bounds the size of the objects and lists JSON shares whole (about their
// encoding's length, each member's name and value with a few bytes of quotes and separators):
// small ones (a health, a sync policy, one resource of a list) repeat
// across objects; a whole spec seldom does, and holding it would cost what sharing saves.
const maxSharedValueSize = 256

// values holds the first copy of each small object or list, by a hash of its value. A hash
// stands for the value, not its encoding, so that the table holds eight bytes per entry, not
// a key of up to maxSharedValueSize: most entries are values no other object has (a resource
// of one Application's list), and the table is full of them. A hit is compared with the held
// value before it is shared, so two values with one hash are never one.
var values = bounded.NewMap[uint64, any](maxValues)

const maxValues = 1 << 14

// stringValues holds each shared string as an interface value: a string held in an any costs
// a header of its own, which equal strings can share too.
var stringValues = bounded.NewMap[string, any](maxStrings)

// seed is the process's seed for the values' hashes.
var seed = maphash.MakeSeed()

// Kinds of JSON value, mixed into their hashes so that values of two kinds never hash alike
// by construction (a string "1" and a number 1, an empty object and an empty list).
const (
	kindNull uint64 = iota + 1
	kindFalse
	kindTrue
	kindInt
	kindFloat
	kindString
	kindObject
	kindList
	kindMember
)

// share returns v's shared copy, a hash of its value, and its size, or a size over
// maxSharedValueSize when v is too large to be shared whole (its members still are).
func share(v any) (any, uint64, int) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		// Members are hashed each and summed: the sum does not depend on the map's order, so
		// no sorted copy of the keys is needed.
		h, size := mix(kindObject, uint64(len(x))), 2
		for k, e := range x {
			se, eh, esize := share(e)
			k = String(k)
			out[k] = se
			h += mix(kindMember, maphash.String(seed, k)^(eh*golden))
			size += len(k) + esize + 4
		}
		return shareWhole(out, h, size)
	case []any:
		out := make([]any, len(x))
		h, size := mix(kindList, uint64(len(x))), 2
		for i, e := range x {
			var eh uint64
			var esize int
			out[i], eh, esize = share(e)
			h = mix(h, eh)
			size += esize + 1
		}
		return shareWhole(out, h, size)
	case string:
		if len(x) > MaxStringLength {
			return x, 0, maxSharedValueSize + 1
		}
		s := String(x)
		return stringValues.LoadOrStore(s, s), mix(kindString, maphash.String(seed, s)), len(s) + 2
	case bool:
		if x {
			return x, mix(kindTrue, 0), 4
		}
		return x, mix(kindFalse, 0), 5
	case int64:
		return x, mix(kindInt, uint64(x)), digits(x)
	case float64:
		return x, mix(kindFloat, math.Float64bits(x)), 24
	case nil:
		return nil, mix(kindNull, 0), 4
	}
	return v, 0, maxSharedValueSize + 1
}

// golden (2^64 divided by the golden ratio) spreads a member's value hash before it is
// combined with its name's.
const golden = 0x9e3779b97f4a7c15

// digits is the length of n in decimal.
func digits(n int64) int {
	d := 1
	if n < 0 {
		d++
	}
	for n <= -10 || n >= 10 {
		n /= 10
		d++
	}
	return d
}

// mix combines a hash with a value (splitmix64's finalizer).
func mix(h, v uint64) uint64 {
	h ^= v + golden + h<<6 + h>>2
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// shareWhole returns the held copy of v when v is small enough and an equal value is held
// under its hash (or holds v), with v's hash and size.
func shareWhole(v any, h uint64, size int) (any, uint64, int) {
	if size > maxSharedValueSize {
		return v, h, size
	}
	if held := values.LoadOrStore(h, v); equal(held, v) {
		return held, h, size
	}
	return v, h, size
}

// equal reports whether a and b are the same JSON value, of the same kinds (an int64 is never
// a float64). Shared members are compared by identity first.
func equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() {
			return true
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok || !equal(e, f) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if len(x) > 0 && &x[0] == &y[0] {
			return true
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case nil:
		return b == nil
	}
	return false
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
