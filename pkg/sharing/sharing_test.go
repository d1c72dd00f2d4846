package sharing

import (
	"encoding/json"
	"math"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// decoded is v as Kubernetes' unstructured decoder makes it from JSON: every string and map
// its own.
func decoded(t *testing.T, doc string) any {
	t.Helper()
	var v any
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return numbers(v)
}

// numbers turns json.Number into int64 or float64, as the unstructured decoder does.
func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

func mapPointer(v any) unsafe.Pointer { return reflect.ValueOf(v).UnsafePointer() }

func TestJSONSharesWhatRepeatsAndKeepsEveryValue(t *testing.T) {
	const doc = `{"spec":{"source":{"path":"apps/%s","repoURL":"https://git.example/apps"},"syncPolicy":{"automated":{"prune":true}}},
		"status":{"health":{"status":"Healthy"},"replicas":3,"ratio":0.5,"note":null,"items":["a","b"],"long":"` + "%s" + `"}}`
	long := strings.Repeat("x", MaxStringLength+1)
	var outs []map[string]any
	for _, app := range []string{"one", "two"} {
		in := decoded(t, strings.Replace(strings.Replace(doc, "%s", app, 1), "%s", long, 1))
		before, _ := json.Marshal(in)
		out := JSON(in)
		after, _ := json.Marshal(in)
		if string(before) != string(after) {
			t.Fatal("JSON changed the value it was given")
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("the shared copy differs: %v, want %v", out, in)
		}
		runtime.GC()
		outs = append(outs, out.(map[string]any))
	}
	status := func(o map[string]any) map[string]any { return o["status"].(map[string]any) }
	spec := func(o map[string]any) map[string]any { return o["spec"].(map[string]any) }
	a, b := outs[0], outs[1]
	if mapPointer(status(a)["health"]) != mapPointer(status(b)["health"]) || mapPointer(spec(a)["syncPolicy"]) != mapPointer(spec(b)["syncPolicy"]) {
		t.Error("equal small objects are copies each")
	}
	if mapPointer(status(a)["items"]) != mapPointer(status(b)["items"]) {
		t.Error("equal small lists are copies each")
	}
	sa, sb := spec(a)["source"].(map[string]any), spec(b)["source"].(map[string]any)
	if mapPointer(sa) == mapPointer(sb) {
		t.Error("different objects are one")
	}
	if !Same(sa["repoURL"].(string), sb["repoURL"].(string)) {
		t.Error("equal strings are copies each")
	}
	if Same(status(a)["long"].(string), status(b)["long"].(string)) {
		t.Error("a string longer than MaxStringLength is shared")
	}
}

// TestJSONTellsApartWhatEncodesAlike: values that only look alike (a string and a number, a
// key and a value run together, an empty object and an empty list) are never one shared value.
func TestJSONTellsApartWhatEncodesAlike(t *testing.T) {
	pairs := [][2]string{
		{`{"a":"1"}`, `{"a":1}`},
		{`{"a":1}`, `{"a":1.0}`},
		{`{"ab":"c"}`, `{"a":"bc"}`},
		{`["a","b"]`, `["ab"]`},
		{`["as","b"]`, `["a","sb"]`},
		{`{"a":"s","b":"c"}`, `{"a":"sb","":"c"}`},
		{`{"a":{}}`, `{"a":[]}`},
		{`{"a":true}`, `{"a":"true"}`},
		{`{"a":null}`, `{"a":"n"}`},
		{`[{"a":"b"}]`, `[["a","b"]]`},
	}
	for _, p := range pairs {
		x, y := decoded(t, p[0]), decoded(t, p[1])
		if reflect.DeepEqual(x, y) {
			t.Errorf("%s and %s decode alike: nothing to check", p[0], p[1])
			continue
		}
		if got := JSON(x); !reflect.DeepEqual(got, x) {
			t.Errorf("%s is shared as %v", p[0], got)
		}
		if got := JSON(y); !reflect.DeepEqual(got, y) {
			t.Errorf("%s is shared as %v", p[1], got)
		}
	}
}

func TestPointerSharesShortValues(t *testing.T) {
	one, two := strings.Clone("Healthy"), strings.Clone("Healthy")
	if Pointer(&one) != Pointer(&two) || *Pointer(&one) != "Healthy" {
		t.Error("equal short values are two pointers")
	}
	long := strings.Repeat("y", MaxStringLength+1)
	if p := Pointer(&long); p != &long {
		t.Error("a long value is replaced")
	}
	if Pointer(nil) != nil {
		t.Error("nil is replaced")
	}
}

// TestJSONNeverSharesAcrossAHashCollision: the values table is keyed by a hash of each value;
// a value held under the same hash that is not equal is never handed out for it.
func TestJSONNeverSharesAcrossAHashCollision(t *testing.T) {
	in := decoded(t, `{"health":{"status":"Degraded","message":"collided"}}`).(map[string]any)
	_, h, size := share(decoded(t, `{"status":"Degraded","message":"collided"}`))
	if size > maxSharedValueSize {
		t.Fatal("the value is too large to be shared: nothing to check")
	}
	other := decoded(t, `{"status":"Healthy","message":"held"}`)
	values.Store(h, other)
	t.Cleanup(func() { values.LoadAndDelete(h) })
	out := JSON(in).(map[string]any)
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("the shared copy is %v, want %v", out, in)
	}
	if mapPointer(out["health"]) == mapPointer(other) {
		t.Error("a value held under the same hash was handed out")
	}
}

func TestDigits(t *testing.T) {
	for _, n := range []int64{0, 7, -7, 10, 99, -100, 123456, math.MaxInt64, math.MinInt64} {
		if got, want := digits(n), len(strconv.FormatInt(n, 10)); got != want {
			t.Errorf("digits(%d) = %d, want %d", n, got, want)
		}
	}
}
