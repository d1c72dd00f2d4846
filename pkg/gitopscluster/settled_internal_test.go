package gitopscluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestSettledEnqueuesEveryEventAfterItsSettle: the handler of OCM's addons and probes enqueues
// the GitOpsClusters an event maps to after the settle, whatever the kind of event, and never at
// once.
func TestSettledEnqueuesEveryEventAfterItsSettle(t *testing.T) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "fleet"}}
	h := settled(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{req} }, ocmStatusSettle)
	ctx, q, o := context.Background(), &recordingQueue{}, &addonv1alpha1.ManagedClusterAddOn{}
	h.Create(ctx, event.CreateEvent{Object: o}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: o, ObjectNew: o}, q)
	h.Delete(ctx, event.DeleteEvent{Object: o}, q)
	h.Generic(ctx, event.GenericEvent{Object: o}, q)
	if want := slices.Repeat([]time.Duration{ocmStatusSettle}, 4); !slices.Equal(q.added, want) {
		t.Errorf("enqueued after %v, want %v", q.added, want)
	}
}
