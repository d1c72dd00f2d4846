package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
)

// TestSameJSONAgreesWithEncoding: comparing without encoding decides as comparing the
// encodings did, for the values a status holds and those that fall back to encoding.
func TestSameJSONAgreesWithEncoding(t *testing.T) {
	values := []any{
		nil, "", "a", "b", int64(1), float64(1), 1.5, true,
		map[string]any(nil), map[string]any{}, map[string]any{"a": "x"}, map[string]any{"a": "x", "b": nil},
		map[string]any{"a": int64(2)}, map[string]any{"a": float64(2)}, map[string]any{"a": []any{"x"}},
		[]any(nil), []any{}, []any{"x"}, []any{"x", "y"}, []any{map[string]any{"a": "x"}}, []any{nil},
	}
	for _, a := range values {
		for _, b := range values {
			x, _ := json.Marshal(a)
			y, _ := json.Marshal(b)
			if got, want := sameJSON(a, b), bytes.Equal(x, y); got != want {
				t.Errorf("sameJSON(%s, %s) = %v, want %v", x, y, got, want)
			}
		}
	}
}

// TestShowsAgreesWithEncoding: an item of status.resources shows a resource exactly when it
// encodes as the item written for it.
func TestShowsAgreesWithEncoding(t *testing.T) {
	resources := []resourcelist.Resource{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "apps", Name: "web"},
		{Version: "v1", Kind: "Namespace", Name: "apps"},
	}
	items := []any{
		nil, "x",
		map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "apps", "name": "web"},
		map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "apps", "name": "web", "status": "Synced"},
		map[string]any{"group": "", "version": "v1", "kind": "Namespace", "name": "apps"},
		map[string]any{"version": "v1", "kind": "Namespace", "name": "apps"},
		map[string]any{"version": "v1", "kind": "Namespace", "name": "apps", "namespace": ""},
		map[string]any{"version": "v1", "kind": "Namespace", "name": int64(1)},
	}
	for _, r := range resources {
		want, _ := json.Marshal(resourceMap(r))
		for _, item := range items {
			have, _ := json.Marshal(item)
			if got := shows(item, r); got != bytes.Equal(want, have) {
				t.Errorf("shows(%s, %v) = %v", have, fmt.Sprint(r), got)
			}
		}
	}
}
