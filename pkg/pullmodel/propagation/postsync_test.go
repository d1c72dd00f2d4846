package propagation_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// TestPostSyncReconcileRule: an ApplicationSet's Application reads the spoke's reconcile time
// after a finished sync until the spoke has reconciled since (progressive sync waits for that
// time). The rule follows the hub Application's status: in RollingSync's order (request, run,
// clear, then the spoke's next reconcile) it stays while the request is cleared and goes once
// the later reconcile reaches the hub; a sync the spoke starts by itself adds it; and once it is
// gone, periodic refreshes cost no write at all.
func TestPostSyncReconcileRule(t *testing.T) {
	s.CreateCluster(t, "postsync1", true)
	set := s.NewAppSet(t, "postsync-set")
	app := pulltest.NewApp("postsync-guestbook", "postsync1")
	app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: set.GetName(), UID: set.GetUID()}})
	s.Create(t, app)
	app = s.GetApp(t, app.GetName())
	w := s.WaitWork(t, app, "postsync1")
	readWork := func(ctx context.Context) *workv1.ManifestWork {
		cur := &workv1.ManifestWork{}
		_ = s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur)
		return cur
	}
	hub := func() (reconciledAt string, operation bool) {
		cur := s.GetApp(t, app.GetName())
		at, _, _ := unstructured.NestedString(cur.Object, "status", "reconciledAt")
		_, op := cur.Object["operation"]
		return at, op
	}
	if propagation.FeedsBackReconcileTime(readWork(context.Background())) {
		t.Fatal("the reconcile time is read before any sync")
	}
	spoke := map[string]string{"healthStatus": "Healthy", "syncStatus": "OutOfSync", "syncRevision": "abc123", "reconciledAt": "2026-01-01T00:10:00Z"}
	s.SetFeedback(t, w, spoke)

	// RollingSync asks for a sync: the request and the reconcile time go out.
	patchApp(t, app.GetName(), rollingSyncOperation)
	poll.UntilState(t, "the request in the ManifestWork, reading the reconcile time", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := readWork(ctx)
		return propagation.Operation(cur) != nil && propagation.FeedsBackReconcileTime(cur), fmt.Sprintf("operation %v", propagation.Operation(cur))
	})
	spoke = maps.Clone(spoke)
	maps.Copy(spoke, map[string]string{"operationStatePhase": "Running", "operationStateStartedAt": "2026-01-01T00:10:10Z", "reconciledAt": "2026-01-01T00:10:09Z",
		"operationStateRequest": readWork(context.Background()).Annotations[pullmodel.AnnotationOperationRequest]})
	s.SetFeedback(t, w, spoke)
	// Finished: the spoke's last reconcile is from before the end; Argo CD reconciles again
	// once it has recorded it.
	maps.Copy(spoke, map[string]string{"operationStatePhase": "Succeeded", "operationStateFinishedAt": "2026-01-01T00:10:11Z", "syncStatus": "Synced"})
	s.SetFeedback(t, w, spoke)
	poll.UntilState(t, "the request cleared on the hub and out of the ManifestWork, the reconcile time still read", 10*time.Second, func(ctx context.Context) (bool, string) {
		at, op := hub()
		cur := readWork(ctx)
		return !op && at == "2026-01-01T00:10:09Z" && propagation.Operation(cur) == nil && propagation.FeedsBackReconcileTime(cur),
			fmt.Sprintf("hub operation %v reconciledAt %q; work operation %v, reads the reconcile time %v", op, at, propagation.Operation(cur) != nil, propagation.FeedsBackReconcileTime(cur))
	})
	// The spoke's reconcile after the sync reaches the hub, which alone changes the hub's status.
	spoke["reconciledAt"] = "2026-01-01T00:10:15Z"
	s.SetFeedback(t, w, spoke)
	poll.UntilState(t, "the later reconcile on the hub and the rule gone", 10*time.Second, func(ctx context.Context) (bool, string) {
		at, _ := hub()
		cur := readWork(ctx)
		return at == "2026-01-01T00:10:15Z" && !propagation.FeedsBackReconcileTime(cur), fmt.Sprintf("hub reconciledAt %q, work reads the reconcile time %v", at, propagation.FeedsBackReconcileTime(cur))
	})
	refreshesCostNothing(t, w, spoke, "2026-01-01T00:12:15Z")

	// A sync the spoke started by itself (automated sync, self-heal): no request on the hub,
	// only its status shows the finished operation, and that adds the rule.
	maps.Copy(spoke, map[string]string{"operationStateStartedAt": "2026-01-01T00:20:00Z", "operationStateFinishedAt": "2026-01-01T00:20:02Z", "reconciledAt": "2026-01-01T00:19:58Z"})
	delete(spoke, "operationStateRequest")
	s.SetFeedback(t, w, spoke)
	poll.UntilState(t, "the rule added for the spoke's own sync", 10*time.Second, func(ctx context.Context) (bool, string) {
		return propagation.FeedsBackReconcileTime(readWork(ctx)), "not read"
	})
	spoke["reconciledAt"] = "2026-01-01T00:20:05Z"
	s.SetFeedback(t, w, spoke)
	poll.UntilState(t, "its reconcile on the hub and the rule gone", 10*time.Second, func(ctx context.Context) (bool, string) {
		at, _ := hub()
		cur := readWork(ctx)
		return at == "2026-01-01T00:20:05Z" && !propagation.FeedsBackReconcileTime(cur), fmt.Sprintf("hub reconciledAt %q, work reads the reconcile time %v", at, propagation.FeedsBackReconcileTime(cur))
	})
	refreshesCostNothing(t, w, spoke, "2026-01-01T00:22:05Z")
}

// refreshesCostNothing plays the spoke's periodic refreshes from the reconcile time first on,
// after one status write for the ManifestWork's last change, and checks that they cost no work
// agent status write, no hub Application write and no ManifestWork write.
func refreshesCostNothing(t *testing.T, w *workv1.ManifestWork, spoke map[string]string, first string) {
	t.Helper()
	s.SetFeedback(t, w, spoke)
	apps0, works0 := s.QuietAppWrites(t, 2*time.Second)
	at, err := time.Parse(time.RFC3339, first)
	if err != nil {
		t.Fatal(err)
	}
	agent := 0
	for i := range 5 {
		fb := maps.Clone(spoke)
		fb["reconciledAt"] = at.Add(time.Duration(i) * 2 * time.Minute).Format(time.RFC3339)
		if s.SetFeedback(t, w, fb) {
			agent++
		}
		time.Sleep(300 * time.Millisecond)
	}
	apps1, works1 := s.QuietAppWrites(t, 2*time.Second)
	if agent != 0 || apps1 != apps0 || works1 != works0 {
		t.Errorf("5 periodic refreshes cost %d work-agent status writes, %d hub Application writes, %d ManifestWork writes; want 0", agent, apps1-apps0, works1-works0)
	}
}
