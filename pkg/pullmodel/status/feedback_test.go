package status_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// TestStatusFeedback: the spoke's sync, health, revision and operation reach the hub
// Application as fed back, each change in exactly one Application write, and an unchanged
// feedback costs none. Healthy is written directly: ApplicationSet RollingSync reads the spoke's
// operation start, so no invented Progressing step is needed.
func TestStatusFeedback(t *testing.T) {
	app, w := s.Deliver(t, "status-guestbook", "status1")
	s.QuietAppWrites(t, time.Second) // the delivery's own writes, before the first count

	steps := []map[string]string{
		{"syncStatus": "OutOfSync", "healthStatus": "Missing"},
		{"syncStatus": "Synced", "healthStatus": "Progressing", "syncRevision": "abc123", "operationStatePhase": "Succeeded",
			"operationStateStartedAt": "2026-01-01T00:01:00Z", "operationStateFinishedAt": "2026-01-01T00:01:05Z"},
		{"syncStatus": "Synced", "healthStatus": "Healthy", "syncRevision": "abc123", "operationStatePhase": "Succeeded",
			"operationStateStartedAt": "2026-01-01T00:01:00Z", "operationStateFinishedAt": "2026-01-01T00:01:05Z"},
	}
	for i, fb := range steps {
		before, _ := s.AppWrites(t)
		s.SetFeedback(t, w, fb)
		poll.UntilState(t, fmt.Sprintf("step %d on the hub Application", i), 10*time.Second, func(ctx context.Context) (bool, string) {
			got := statusOf(s.GetApp(t, app.GetName()))
			for k, v := range fb {
				if got[k] != v {
					return false, fmt.Sprint(got)
				}
			}
			return true, ""
		})
		after, _ := s.QuietAppWrites(t, 1500*time.Millisecond)
		if after-before != 1 {
			t.Errorf("step %d cost %d Application writes, want 1", i, after-before)
		}
	}
	// The same feedback again (the work agent rewrites status with new times elsewhere).
	before, _ := s.AppWrites(t)
	s.SetFeedback(t, w, steps[len(steps)-1])
	if after, _ := s.QuietAppWrites(t, 2*time.Second); after != before {
		t.Errorf("unchanged feedback cost %d Application writes, want 0", after-before)
	}
	// A later operation without a finish time removes the old finish time.
	s.SetFeedback(t, w, map[string]string{"syncStatus": "OutOfSync", "healthStatus": "Healthy", "operationStatePhase": "Running", "operationStateStartedAt": "2026-01-01T00:03:00Z"})
	poll.UntilState(t, "the running operation without the old finish time", 10*time.Second, func(ctx context.Context) (bool, string) {
		got := statusOf(s.GetApp(t, app.GetName()))
		return got["operationStatePhase"] == "Running" && got["operationStateFinishedAt"] == "" && got["syncRevision"] == "", fmt.Sprint(got)
	})
}

// TestIdleSpokeRefreshesCostNoWrites: the spoke's Argo CD refreshes every Application
// periodically (timeout.reconciliation, 120 s by default) and rewrites its reconcile time each
// time. With nothing else changing, that costs neither a ManifestWork status write by OCM's work
// agent (no feedback rule names the reconcile time) nor a hub Application write.
func TestIdleSpokeRefreshesCostNoWrites(t *testing.T) {
	app, w := s.Deliver(t, "idle-guestbook", "idle1")
	settled := map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy", "syncRevision": "abc123"}
	s.SetFeedback(t, w, settled)
	poll.UntilState(t, "Synced and Healthy on the hub", 10*time.Second, func(ctx context.Context) (bool, string) {
		got := statusOf(s.GetApp(t, app.GetName()))
		return got["healthStatus"] == "Healthy", fmt.Sprint(got)
	})
	apps0, works0 := s.QuietAppWrites(t, 1500*time.Millisecond)
	agentWrites := 0
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		fb := maps.Clone(settled)
		fb["reconciledAt"] = start.Add(time.Duration(i) * 2 * time.Minute).Format(time.RFC3339)
		if s.SetFeedback(t, w, fb) {
			agentWrites++
		}
	}
	apps1, works1 := s.QuietAppWrites(t, 2*time.Second)
	if agentWrites != 0 || apps1 != apps0 || works1 != works0 {
		t.Errorf("5 periodic refreshes cost %d work-agent status writes, %d hub Application writes, %d ManifestWork writes; want 0",
			agentWrites, apps1-apps0, works1-works0)
	}
}

// TestFailuresOnTheClusterReachTheHub: why an Application fails on the cluster reaches the hub
// Application: a comparison error of the spoke's Argo CD (a path missing in Git), and OCM's work
// agent refused the Application.
func TestFailuresOnTheClusterReachTheHub(t *testing.T) {
	app, w := s.Deliver(t, "fail-guestbook", "fail1")
	s.SetFeedback(t, w, map[string]string{"syncStatus": "Unknown", "healthStatus": "Healthy",
		"conditionTypes": "ComparisonError", "conditionMessages": "Failed to load target state: app path does not exist", "conditionTransitionTimes": "2026-01-01T00:00:00Z"})
	poll.UntilState(t, "the spoke's ComparisonError on the hub", 10*time.Second, func(ctx context.Context) (bool, string) {
		conds := pullmodel.Conditions(s.GetApp(t, app.GetName()))
		return len(conds) == 1 && conds[0].(map[string]any)["type"] == "ComparisonError" &&
			strings.Contains(conds[0].(map[string]any)["message"].(string), "path does not exist"), fmt.Sprint(conds)
	})
	s.WriteWorkStatus(t, w, nil, metav1.ConditionFalse, `applications.argoproj.io "fail-guestbook" is forbidden: User "system:serviceaccount:open-cluster-management-agent:klusterlet-work-sa" cannot get resource "applications"`)
	poll.UntilState(t, "the work agent's refusal on the hub", 10*time.Second, func(ctx context.Context) (bool, string) {
		conds := pullmodel.Conditions(s.GetApp(t, app.GetName()))
		return len(conds) == 1 && conds[0].(map[string]any)["type"] == pullmodel.ConditionApplyError &&
			strings.Contains(conds[0].(map[string]any)["message"].(string), "forbidden"), fmt.Sprint(conds)
	})
	s.SetFeedback(t, w, map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy"})
	poll.UntilState(t, "no conditions once the cluster reports none", 10*time.Second, func(ctx context.Context) (bool, string) {
		conds := pullmodel.Conditions(s.GetApp(t, app.GetName()))
		return len(conds) == 0, fmt.Sprint(conds)
	})
}

// statusOf returns the hub Application's status fields under their feedback names.
func statusOf(app *unstructured.Unstructured) map[string]string {
	field := func(path ...string) string {
		v, _, _ := unstructured.NestedString(app.Object, append([]string{"status"}, path...)...)
		return v
	}
	return map[string]string{
		"syncStatus":               field("sync", "status"),
		"syncRevision":             field("sync", "revision"),
		"healthStatus":             field("health", "status"),
		"operationStatePhase":      field("operationState", "phase"),
		"operationStateStartedAt":  field("operationState", "startedAt"),
		"operationStateFinishedAt": field("operationState", "finishedAt"),
		"reconciledAt":             field("reconciledAt"),
	}
}
