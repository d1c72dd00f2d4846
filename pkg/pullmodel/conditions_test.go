package pullmodel

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestTruncate: a message within the limit is kept; a longer one is cut at a character
// boundary, says so, and fits the limit.
func TestTruncate(t *testing.T) {
	if got := Truncate("short", 10); got != "short" {
		t.Errorf("Truncate kept %q, want short", got)
	}
	long := strings.Repeat("é", 40) // two bytes each
	for _, limit := range []int{16, 17, 30, 31} {
		got := Truncate(long, limit)
		if len(got) > limit || !utf8.ValidString(got) || !strings.HasSuffix(got, " ... (truncated)") {
			t.Errorf("Truncate(%d) = %q (%d bytes): want a valid string within the limit that says it was cut", limit, got, len(got))
		}
	}
}

// TestWithDeliveryCondition: the delivery condition is set, replaced and removed without
// touching the other conditions.
func TestWithDeliveryCondition(t *testing.T) {
	app := NewApplication()
	other := map[string]any{"type": "SyncError", "message": "from the spoke"}
	_ = unstructured.SetNestedSlice(app.Object, []any{other}, "status", "conditions")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	_ = unstructured.SetNestedSlice(app.Object, WithDeliveryCondition(app, "UnknownCluster: first", now), "status", "conditions")
	_ = unstructured.SetNestedSlice(app.Object, WithDeliveryCondition(app, "UnknownCluster: second", now), "status", "conditions")
	if msg, ok := DeliveryCondition(app); !ok || msg != "UnknownCluster: second" || len(Conditions(app)) != 2 {
		t.Errorf("after two refusals: delivery condition %q (%v), %d conditions; want the second alone beside the spoke's", msg, ok, len(Conditions(app)))
	}
	if got := WithDeliveryCondition(app, "", now); len(got) != 1 || got[0].(map[string]any)["type"] != "SyncError" {
		t.Errorf("cleared: %v, want the spoke's condition alone", got)
	}
}
