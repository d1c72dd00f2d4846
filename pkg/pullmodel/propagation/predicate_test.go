package propagation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
)

// TestDeliveryInputChangedOnStatus: of the hub Application's status, only a change of the
// post-sync reconcile rule's answer wakes the propagation controller; the status noise the
// status controller writes (health, sync, conditions, a later reconcile time) does not.
func TestDeliveryInputChangedOnStatus(t *testing.T) {
	app := func(owned bool, status map[string]any) *unstructured.Unstructured {
		a := pullmodel.NewApplication()
		a.SetNamespace("argocd")
		a.SetName("guestbook")
		if owned {
			a.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "set", UID: "1"}})
		}
		a.Object["spec"] = map[string]any{"project": "default"}
		a.Object["status"] = status
		return a
	}
	st := func(health, finished, reconciled string, conds ...any) map[string]any {
		s := map[string]any{"health": map[string]any{"status": health}, "sync": map[string]any{"status": "Synced"}}
		if finished != "" {
			s["operationState"] = map[string]any{"phase": "Succeeded", "startedAt": "2026-01-01T00:00:00Z", "finishedAt": finished}
		}
		if reconciled != "" {
			s["reconciledAt"] = reconciled
		}
		if len(conds) > 0 {
			s["conditions"] = conds
		}
		return s
	}
	const t0, t1, t2 = "2026-01-01T00:00:05Z", "2026-01-01T00:00:04Z", "2026-01-01T00:00:09Z"
	for _, c := range []struct {
		name     string
		owned    bool
		old, new map[string]any
		want     bool
	}{
		{"health changes", true, st("Progressing", t0, t2), st("Healthy", t0, t2), false},
		{"a condition appears", true, st("Healthy", t0, t2), st("Healthy", t0, t2, map[string]any{"type": "SyncError", "message": "x"}), false},
		{"a later reconcile, already after the sync", true, st("Healthy", t0, t2), st("Healthy", t0, "2026-01-01T00:02:00Z"), false},
		{"a sync finishes after the last reconcile", true, st("Healthy", "", t1), st("Healthy", t0, t1), true},
		{"the reconcile after the sync arrives", true, st("Healthy", t0, t1), st("Healthy", t0, t2), true},
		{"a second sync while one is pending", true, st("Healthy", t0, t1), st("Healthy", "2026-01-01T00:00:07Z", t1), false},
		{"no ApplicationSet: no rule to follow", false, st("Healthy", t0, t1), st("Healthy", t0, t2), false},
	} {
		got := deliveryInputChanged().Update(event.UpdateEvent{ObjectOld: app(c.owned, c.old), ObjectNew: app(c.owned, c.new)})
		if got != c.want {
			t.Errorf("%s: passes %v, want %v", c.name, got, c.want)
		}
	}
}
