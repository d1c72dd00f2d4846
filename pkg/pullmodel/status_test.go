package pullmodel_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestStatusFeedback: the spoke's sync, health, revision, operation and reconcile time reach
// the hub Application as fed back, each change in exactly one Application write, and an
// unchanged feedback costs none. Healthy is written directly: ApplicationSet RollingSync reads
// the spoke's operation start and reconcile times, so no invented Progressing step is needed.
func TestStatusFeedback(t *testing.T) {
	createCluster(t, "status1", true)
	app := newApp("status-guestbook", "status1")
	create(t, app)
	app = getApp(t, app.GetName())
	w := waitWork(t, app, "status1")
	time.Sleep(time.Second)

	steps := []map[string]string{
		{"syncStatus": "OutOfSync", "healthStatus": "Missing", "reconciledAt": "2026-01-01T00:00:00Z"},
		{"syncStatus": "Synced", "healthStatus": "Progressing", "syncRevision": "abc123", "operationStatePhase": "Succeeded",
			"operationStateStartedAt": "2026-01-01T00:01:00Z", "operationStateFinishedAt": "2026-01-01T00:01:05Z", "reconciledAt": "2026-01-01T00:01:06Z"},
		{"syncStatus": "Synced", "healthStatus": "Healthy", "syncRevision": "abc123", "operationStatePhase": "Succeeded",
			"operationStateStartedAt": "2026-01-01T00:01:00Z", "operationStateFinishedAt": "2026-01-01T00:01:05Z", "reconciledAt": "2026-01-01T00:02:00Z"},
	}
	for i, fb := range steps {
		before, _ := appWrites(t)
		setFeedback(t, w, fb)
		eventually(t, fmt.Sprintf("step %d on the hub Application", i), 10*time.Second, func(ctx context.Context) (bool, string) {
			got := statusOf(getApp(t, app.GetName()))
			for k, v := range fb {
				if got[k] != v {
					return false, fmt.Sprint(got)
				}
			}
			return true, ""
		})
		time.Sleep(1500 * time.Millisecond)
		after, _ := appWrites(t)
		if after-before != 1 {
			t.Errorf("step %d cost %d Application writes, want 1", i, after-before)
		}
	}
	// The same feedback again (the work agent rewrites status with new times elsewhere).
	before, _ := appWrites(t)
	setFeedback(t, w, steps[len(steps)-1])
	time.Sleep(2 * time.Second)
	if after, _ := appWrites(t); after != before {
		t.Errorf("unchanged feedback cost %d Application writes, want 0", after-before)
	}
	// A later operation without a finish time removes the old finish time.
	setFeedback(t, w, map[string]string{"syncStatus": "OutOfSync", "healthStatus": "Healthy", "operationStatePhase": "Running", "operationStateStartedAt": "2026-01-01T00:03:00Z"})
	eventually(t, "the running operation without the old finish time", 10*time.Second, func(ctx context.Context) (bool, string) {
		got := statusOf(getApp(t, app.GetName()))
		return got["operationStatePhase"] == "Running" && got["operationStateFinishedAt"] == "" && got["syncRevision"] == "", fmt.Sprint(got)
	})
}

// statusOf returns the hub Application's status fields under their feedback names.
func statusOf(app *unstructured.Unstructured) map[string]string {
	s := func(path ...string) string {
		v, _, _ := unstructured.NestedString(app.Object, append([]string{"status"}, path...)...)
		return v
	}
	return map[string]string{
		"syncStatus":               s("sync", "status"),
		"syncRevision":             s("sync", "revision"),
		"healthStatus":             s("health", "status"),
		"operationStatePhase":      s("operationState", "phase"),
		"operationStateStartedAt":  s("operationState", "startedAt"),
		"operationStateFinishedAt": s("operationState", "finishedAt"),
		"reconciledAt":             s("reconciledAt"),
	}
}
