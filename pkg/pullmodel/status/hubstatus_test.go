package status_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/jsonpath"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/status"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// stockAgentFeedback is what a stock OCM work agent (v1.2.1, RawFeedbackJsonString off) feeds
// back from the spoke Application spoke under the ManifestWork's current rules: each path read
// with missing keys allowed, and of several values the first.
func stockAgentFeedback(t *testing.T, w *workv1.ManifestWork, spoke map[string]any) map[string]string {
	t.Helper()
	cur := &workv1.ManifestWork{}
	if err := s.Client.Get(context.Background(), client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, mc := range cur.Spec.ManifestConfigs {
		for _, r := range mc.FeedbackRules {
			for _, p := range r.JsonPaths {
				j := jsonpath.New(p.Name).AllowMissingKeys(true)
				if err := j.Parse("{" + p.Path + "}"); err != nil {
					t.Fatalf("rule %s: %v", p.Name, err)
				}
				res, err := j.FindResults(spoke)
				if err != nil {
					t.Fatalf("rule %s: %v", p.Name, err)
				}
				if len(res) > 0 && len(res[0]) > 0 {
					out[p.Name] = fmt.Sprint(res[0][0].Interface())
				}
			}
		}
	}
	return out
}

// TestErrorListedAfterAWarningReachesTheHub: Argo CD sorts an Application's conditions by type,
// so a warning often comes first; a stock work agent feeds back only the first condition of a
// list. The spoke's SyncError, listed after two warnings and with a message longer than the
// 1,024 bytes OCM's raw-JSON feedback allows, still reaches the hub Application's conditions.
func TestErrorListedAfterAWarningReachesTheHub(t *testing.T) {
	app, w := s.Deliver(t, "hubstatus-errors", "hubstatus1")
	long := "one or more objects failed to apply, reason: " + strings.Repeat("admission webhook denied the request; ", 60)
	spoke := map[string]any{"status": map[string]any{
		"sync":   map[string]any{"status": "OutOfSync"},
		"health": map[string]any{"status": "Healthy"},
		"conditions": []any{
			map[string]any{"type": "OrphanedResourceWarning", "message": "Application has 2 orphaned resources", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			map[string]any{"type": "SharedResourceWarning", "message": "ConfigMap/settings is part of applications other", "lastTransitionTime": "2026-01-01T00:00:01Z"},
			map[string]any{"type": "SyncError", "message": long, "lastTransitionTime": "2026-01-01T00:00:02Z"},
		},
	}}
	s.SetFeedback(t, w, stockAgentFeedback(t, w, spoke))
	poll.UntilState(t, "the SyncError on the hub beside the first warning", 10*time.Second, func(ctx context.Context) (bool, string) {
		var types []string
		var syncErr string
		for _, c := range pullmodel.Conditions(s.GetApp(t, app.GetName())) {
			m := c.(map[string]any)
			types = append(types, m["type"].(string))
			if m["type"] == "SyncError" {
				syncErr, _ = m["message"].(string)
			}
		}
		return strings.Join(types, ",") == "OrphanedResourceWarning,SyncError" && strings.HasPrefix(syncErr, "one or more objects failed to apply") &&
			len(syncErr) > 1000 && len(syncErr) <= status.MaxMessageBytes, fmt.Sprintf("types %v, SyncError of %d bytes", types, len(syncErr))
	})
}

// TestStandaloneApplicationShowsResources: an Application of no ApplicationSet gets the objects
// its cluster's resource reporter lists in its hub status.resources, bounded as the list is,
// written once, and nothing is written again while the list stays.
func TestStandaloneApplicationShowsResources(t *testing.T) {
	app, w := s.Deliver(t, "hubstatus-resources", "hubstatus2")
	var spokeApp map[string]any
	if err := json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &spokeApp); err != nil {
		t.Fatal(err)
	}
	if labels, _, _ := unstructured.NestedStringMap(spokeApp, "metadata", "labels"); labels[resourcelist.LabelReported] != "true" {
		t.Fatalf("spoke Application labels %v: the reporter would not list it", labels)
	}
	// More objects than one list may carry: the reporter keeps the first that fit and the total.
	var all []resourcelist.Resource
	for i := range 1000 {
		all = append(all, resourcelist.Resource{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "guestbook", Name: fmt.Sprintf("guestbook-ui-%04d", i)})
	}
	listed, _, err := resourcelist.Decode(resourcelist.Encode(all))
	if err != nil || len(listed) == 0 || len(listed) == len(all) {
		t.Fatalf("%d of %d listed (%v)", len(listed), len(all), err)
	}
	spoke := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{pullmodel.AnnotationResourceList: resourcelist.Encode(all)}},
		"status":   map[string]any{"sync": map[string]any{"status": "Synced"}, "health": map[string]any{"status": "Healthy"}},
	}
	s.SetFeedback(t, w, stockAgentFeedback(t, w, spoke))
	poll.UntilState(t, "the listed objects in the hub's status.resources", 10*time.Second, func(ctx context.Context) (bool, string) {
		res, _, _ := unstructured.NestedSlice(s.GetApp(t, app.GetName()).Object, "status", "resources")
		if len(res) != len(listed) {
			return false, fmt.Sprintf("%d resources", len(res))
		}
		first := res[0].(map[string]any)
		return first["group"] == "apps" && first["kind"] == "Deployment" && first["name"] == "guestbook-ui-0000" && first["namespace"] == "guestbook" && first["version"] == "v1", fmt.Sprint(first)
	})
	raw, _ := json.Marshal(s.GetApp(t, app.GetName()).Object["status"].(map[string]any)["resources"])
	if len(raw) > status.MaxResourcesBytes {
		t.Errorf("status.resources is %d bytes, more than %d", len(raw), status.MaxResourcesBytes)
	}
	apps0, _ := s.QuietAppWrites(t, time.Second)
	spoke["status"].(map[string]any)["reconciledAt"] = "2026-01-01T00:02:00Z"
	s.SetFeedback(t, w, stockAgentFeedback(t, w, spoke))
	if apps1, _ := s.QuietAppWrites(t, 2*time.Second); apps1 != apps0 {
		t.Errorf("an unchanged list cost %d hub Application writes, want 0", apps1-apps0)
	}
	// The reporter removes its annotation when the Application deploys nothing: the hub's list goes.
	delete(spoke, "metadata")
	s.SetFeedback(t, w, stockAgentFeedback(t, w, spoke))
	poll.UntilState(t, "no status.resources once the cluster lists none", 10*time.Second, func(ctx context.Context) (bool, string) {
		res, found, _ := unstructured.NestedSlice(s.GetApp(t, app.GetName()).Object, "status", "resources")
		return !found, fmt.Sprintf("%d resources", len(res))
	})
}
