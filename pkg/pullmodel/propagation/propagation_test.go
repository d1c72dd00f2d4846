package propagation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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

// payload returns the spoke Application a ManifestWork carries.
func payload(t *testing.T, w *workv1.ManifestWork) *unstructured.Unstructured {
	t.Helper()
	// The Application, then its AppProject when it names one other than default.
	if n := len(w.Spec.Workload.Manifests); n != 1 && n != 2 {
		t.Fatalf("ManifestWork %s has %d manifests, want 1 or 2", w.Name, n)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestPropagation: a marked Application becomes one ManifestWork in its cluster's namespace,
// named after it and its UID, carrying the Application without the OCM keys and
// skip-reconcile, in-cluster, with feedback rules; an ApplicationSet-owned one carries its
// ApplicationSet's identity; a spec change is one ManifestWork write; an idle Application costs
// no write at all.
func TestPropagation(t *testing.T) {
	ctx := context.Background()
	s.CreateCluster(t, "prop1", true)
	app := pulltest.NewApp("prop-guestbook", "prop1")
	app.SetFinalizers([]string{pullmodel.ResourcesFinalizer})
	app.SetAnnotations(mergeMap(app.GetAnnotations(), map[string]string{pullmodel.AnnotationAppNamespace: pulltest.ArgoNS}))
	s.Create(t, app)
	app = s.GetApp(t, app.GetName())
	w := s.WaitWork(t, app, "prop1")

	if w.Name != app.GetName()+"-"+string(app.GetUID())[:5] {
		t.Errorf("ManifestWork name %s, want the Application's name and the first 5 characters of its UID", w.Name)
	}
	if w.Labels[pullmodel.LabelPull] != "true" || w.Annotations[pullmodel.AnnotationHubAppNamespace] != pulltest.ArgoNS || w.Annotations[pullmodel.AnnotationHubAppName] != app.GetName() {
		t.Errorf("ManifestWork labels %v annotations %v: missing the pull label or the hub Application", w.Labels, w.Annotations)
	}
	spoke := payload(t, w)
	if spoke.GetNamespace() != pulltest.ArgoNS || spoke.GetName() != app.GetName() {
		t.Errorf("spoke Application %s/%s, want %s/%s (the configured spoke namespace, which the annotation may only repeat)", spoke.GetNamespace(), spoke.GetName(), pulltest.ArgoNS, app.GetName())
	}
	for _, k := range []string{pullmodel.AnnotationCluster, pullmodel.AnnotationAppNamespace, pullmodel.AnnotationSkipReconcile} {
		if _, ok := spoke.GetAnnotations()[k]; ok {
			t.Errorf("spoke Application keeps hub-only annotation %s", k)
		}
	}
	if _, ok := spoke.GetLabels()[pullmodel.LabelPull]; ok || spoke.GetLabels()["team"] != "blue" || spoke.GetAnnotations()["note"] != "kept" {
		t.Errorf("spoke labels %v annotations %v: want the user's kept and the pull label dropped", spoke.GetLabels(), spoke.GetAnnotations())
	}
	if got := spoke.GetFinalizers(); len(got) != 1 || got[0] != pullmodel.ResourcesFinalizer {
		t.Errorf("spoke finalizers %v, want the resources finalizer (the spoke's Argo CD removes the workload)", got)
	}
	dest, _, _ := unstructured.NestedMap(spoke.Object, "spec", "destination")
	if dest["server"] != pullmodel.InClusterServer || dest["name"] != nil || dest["namespace"] != "guestbook" {
		t.Errorf("spoke destination %v, want server %s, no name, namespace kept", dest, pullmodel.InClusterServer)
	}
	mc := w.Spec.ManifestConfigs
	if len(mc) != 1 || mc[0].ResourceIdentifier.Resource != "applications" || mc[0].ResourceIdentifier.Namespace != pulltest.ArgoNS || len(mc[0].FeedbackRules) != 1 {
		t.Fatalf("manifest configs %+v", mc)
	}
	paths := map[string]string{}
	for _, p := range mc[0].FeedbackRules[0].JsonPaths {
		paths[p.Name] = p.Path
	}
	for name, path := range map[string]string{"healthStatus": ".status.health.status", "syncStatus": ".status.sync.status", "operationStatePhase": ".status.operationState.phase", "operationStateStartedAt": ".status.operationState.startedAt", "syncRevision": ".status.sync.revision"} {
		if paths[name] != path {
			t.Errorf("feedback %s = %q, want %q", name, paths[name], path)
		}
	}

	// Idle: nothing is written however long it sits (the manager resyncs nothing here, but a
	// second reconcile of the same input must compare equal).
	apps0, works0 := s.QuietAppWrites(t, time.Second)
	touch(t, app.GetName()) // a change the spoke does not get reconciles the Application again
	apps1, works1 := s.QuietAppWrites(t, 2*time.Second)
	if apps1-apps0 != 1 || works1 != works0 {
		t.Errorf("after one change the spoke does not get: %d Application writes (want 1, the test's own) and %d ManifestWork writes (want 0)", apps1-apps0, works1-works0)
	}

	// A spec change is one ManifestWork update.
	patchApp(t, app.GetName(), `{"spec":{"source":{"targetRevision":"v2"}}}`)
	poll.UntilState(t, "the new revision in the ManifestWork", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := &workv1.ManifestWork{}
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
			return false, err.Error()
		}
		rev, _, _ := unstructured.NestedString(payload(t, cur).Object, "spec", "source", "targetRevision")
		return rev == "v2", rev
	})
	if _, works2 := s.QuietAppWrites(t, time.Second); works2-works1 != 1 {
		t.Errorf("a spec change cost %d ManifestWork writes, want 1", works2-works1)
	}

	// Owned by an ApplicationSet: its identity goes with the work and the spoke Application.
	set := s.NewAppSet(t, "prop-set")
	owned := pulltest.NewApp("prop-owned", "prop1")
	owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: set.GetName(), UID: set.GetUID()}})
	s.Create(t, owned)
	ow := s.WaitWork(t, s.GetApp(t, owned.GetName()), "prop1")
	want := pulltest.ArgoNS + "/prop-set"
	if ow.Annotations[pullmodel.AnnotationApplicationSet] != want || ow.Labels[pullmodel.LabelApplicationSet] != "true" {
		t.Errorf("ManifestWork of an ApplicationSet's Application: labels %v annotations %v, want %s", ow.Labels, ow.Annotations, want)
	}
	if sp := payload(t, ow); sp.GetAnnotations()[pullmodel.AnnotationApplicationSet] != want || sp.GetLabels()[pullmodel.LabelApplicationSet] != "true" {
		t.Errorf("spoke Application of an ApplicationSet's Application: labels %v annotations %v", sp.GetLabels(), sp.GetAnnotations())
	}
	_ = ctx
}

// TestDestinationAnnotations: the destination annotations replace the spoke destination.
func TestDestinationAnnotations(t *testing.T) {
	s.CreateCluster(t, "prop2", true)
	app := pulltest.NewApp("dest-guestbook", "prop2")
	app.SetAnnotations(mergeMap(app.GetAnnotations(), map[string]string{pullmodel.AnnotationDestinationName: "in-cluster"}))
	s.Create(t, app)
	w := s.WaitWork(t, s.GetApp(t, app.GetName()), "prop2")
	dest, _, _ := unstructured.NestedMap(payload(t, w).Object, "spec", "destination")
	if dest["name"] != "in-cluster" || dest["server"] != nil {
		t.Errorf("spoke destination %v, want name in-cluster and no server", dest)
	}
	for _, k := range []string{pullmodel.AnnotationDestinationName, pullmodel.AnnotationDestinationServer} {
		if _, ok := payload(t, w).GetAnnotations()[k]; ok {
			t.Errorf("spoke keeps %s", k)
		}
	}
}

// TestOperationReachesSpokeOnce: a sync request on the hub goes into the ManifestWork under a
// name and is cleared on the hub only once the spoke reports that request's operation
// finished; then the ManifestWork drops it.
func TestOperationReachesSpokeOnce(t *testing.T) {
	app, w := s.Deliver(t, "op-guestbook", "op1")
	s.SetFeedback(t, w, map[string]string{"healthStatus": "Healthy", "syncStatus": "Synced", "operationStatePhase": "Succeeded", "operationStateStartedAt": "2026-01-01T00:00:00Z"})
	poll.UntilState(t, "status from the first feedback", 10*time.Second, func(ctx context.Context) (bool, string) {
		st, _, _ := unstructured.NestedString(s.GetApp(t, app.GetName()).Object, "status", "operationState", "startedAt")
		return st == "2026-01-01T00:00:00Z", st
	})

	patchApp(t, app.GetName(), `{"operation":{"sync":{"revision":"main"},"initiatedBy":{"username":"alice"}}}`)
	var request string
	poll.UntilState(t, "the operation in the ManifestWork, named", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := &workv1.ManifestWork{}
		_ = s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur)
		request = cur.Annotations[pullmodel.AnnotationOperationRequest]
		return propagation.Operation(cur) != nil && request != "" && propagation.RequestName(propagation.OperationAsSent(cur)) == request, fmt.Sprintf("operation %v annotations %v", propagation.OperationAsSent(cur), cur.Annotations)
	})
	// Not cleared while the spoke has not started it.
	time.Sleep(2 * time.Second)
	if _, ok := s.GetApp(t, app.GetName()).Object["operation"]; !ok {
		t.Fatal("the hub's sync request was cleared before the spoke started an operation")
	}
	s.SetFeedback(t, w, map[string]string{"healthStatus": "Healthy", "syncStatus": "Synced", "operationStatePhase": "Running", "operationStateStartedAt": "2026-01-01T00:05:00Z", "operationStateRequest": request})
	poll.UntilState(t, "the running operation shown, the hub's sync request kept while it runs", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := s.GetApp(t, app.GetName())
		_, has := cur.Object["operation"]
		phase, _, _ := unstructured.NestedString(cur.Object, "status", "operationState", "phase")
		user, _, _ := unstructured.NestedString(cur.Object, "status", "operationState", "operation", "initiatedBy", "username")
		return has && phase == "Running" && user == "alice", fmt.Sprintf("operation present=%v phase=%s initiated by %q", has, phase, user)
	})
	s.SetFeedback(t, w, map[string]string{"healthStatus": "Healthy", "syncStatus": "Synced", "operationStatePhase": "Failed", "operationStateStartedAt": "2026-01-01T00:05:00Z", "operationStateFinishedAt": "2026-01-01T00:05:03Z", "operationStateRequest": request})
	poll.UntilState(t, "the hub's sync request cleared, the finished operation shown", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := s.GetApp(t, app.GetName())
		_, has := cur.Object["operation"]
		phase, _, _ := unstructured.NestedString(cur.Object, "status", "operationState", "phase")
		return !has && phase == "Failed", fmt.Sprintf("operation present=%v phase=%s", has, phase)
	})
	poll.UntilState(t, "the ManifestWork without the operation", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := &workv1.ManifestWork{}
		_ = s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur)
		_, named := cur.Annotations[pullmodel.AnnotationOperationRequest]
		return propagation.Operation(cur) == nil && !named, fmt.Sprint(propagation.Operation(cur))
	})
}

func touch(t *testing.T, name string) {
	t.Helper()
	patchApp(t, name, fmt.Sprintf(`{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"%d"}}}`, time.Now().UnixNano()))
}

func patchApp(t *testing.T, name, patch string) {
	t.Helper()
	app := pullmodel.NewApplication()
	app.SetNamespace(pulltest.ArgoNS)
	app.SetName(name)
	if err := s.Client.Patch(context.Background(), app, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatalf("patching Application %s: %v", name, err)
	}
}

func mergeMap(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestRefreshReachesSpokeOnce: Argo CD's refresh request on the hub goes to the spoke and is
// cleared on the hub once the spoke reports a reconcile after it was sent (the hub's own
// application-controller, kept away by skip-reconcile, would never clear it).
func TestRefreshReachesSpokeOnce(t *testing.T) {
	app, w := s.Deliver(t, "refresh-guestbook", "refresh1")
	s.SetFeedback(t, w, map[string]string{"healthStatus": "Healthy", "syncStatus": "Synced"})
	poll.UntilState(t, "status from the first feedback", 10*time.Second, func(ctx context.Context) (bool, string) {
		h, _, _ := unstructured.NestedString(s.GetApp(t, app.GetName()).Object, "status", "health", "status")
		return h == "Healthy", h
	})
	requested := time.Now().UTC().Truncate(time.Second)
	patchApp(t, app.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"hard"}}}`, pullmodel.AnnotationRefresh))
	poll.UntilState(t, "the refresh request in the ManifestWork, sent at a hub time", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := &workv1.ManifestWork{}
		_ = s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur)
		v, ok := propagation.Refresh(cur)
		at, err := time.Parse(time.RFC3339, cur.Annotations[pullmodel.AnnotationRefreshBaseline])
		return ok && v == "hard" && err == nil && !at.Before(requested.Add(-time.Second)), fmt.Sprint(v, cur.Annotations)
	})
	// The first reconcile time fed back is from before the request: it does not count.
	s.SetFeedback(t, w, map[string]string{"healthStatus": "Healthy", "syncStatus": "Synced", "reconciledAt": requested.Add(-time.Minute).Format(time.RFC3339)})
	time.Sleep(time.Second)
	if _, ok := s.GetApp(t, app.GetName()).GetAnnotations()[pullmodel.AnnotationRefresh]; !ok {
		t.Fatal("the hub's refresh request was cleared before the spoke reconciled")
	}
	served := requested.Add(time.Minute).Format(time.RFC3339)
	s.SetFeedback(t, w, map[string]string{"healthStatus": "Healthy", "syncStatus": "Synced", "reconciledAt": served})
	poll.UntilState(t, "the hub's refresh request cleared, its reconcile time shown, and the ManifestWork without it", 10*time.Second, func(ctx context.Context) (bool, string) {
		hub := s.GetApp(t, app.GetName())
		_, onHub := hub.GetAnnotations()[pullmodel.AnnotationRefresh]
		at, _, _ := unstructured.NestedString(hub.Object, "status", "reconciledAt")
		cur := &workv1.ManifestWork{}
		_ = s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur)
		_, inWork := propagation.Refresh(cur)
		return !onHub && !inWork && at == served, fmt.Sprintf("on hub %v, in work %v, reconciledAt %q", onHub, inWork, at)
	})
}

// rollingSyncOperation is the sync request Argo CD's ApplicationSet RollingSync puts on an
// Application (progressivesync.syncApplication in v3.6): it carries a number (retry.limit),
// which the API server returns as an integer and a ManifestWork's payload decodes as a float.
const rollingSyncOperation = `{"operation":{"initiatedBy":{"username":"applicationset-controller","automated":true},` +
	`"info":[{"name":"Reason","value":"ApplicationSet RollingSync triggered a sync of this Application resource"}],` +
	`"sync":{"revision":"abc123","prune":true,"syncOptions":["CreateNamespace=true"]},"retry":{"limit":5}}}`

// TestRollingSyncOperationRoundTrip: RollingSync's sync request stays on the hub while the
// spoke runs it and is cleared once the spoke has finished it, like Argo CD's own controller
// does; the ApplicationSet then asks again with the very same request when its step is still
// Pending (the spoke's start fell within the second of its own transition time), and that
// request reaches the spoke as a new delivery, even when the clear and the new request come
// too close together for the ManifestWork to ever be written without an operation; and it is
// cleared once run even when the spoke started it within the second of the run before.
func TestRollingSyncOperationRoundTrip(t *testing.T) {
	app, w := s.Deliver(t, "rs-guestbook", "rs1")
	s.SetFeedback(t, w, map[string]string{"healthStatus": "Missing", "syncStatus": "OutOfSync", "syncRevision": "abc123", "reconciledAt": "2026-01-01T00:00:00Z"})

	readWork := func(ctx context.Context) *workv1.ManifestWork {
		cur := &workv1.ManifestWork{}
		_ = s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur)
		return cur
	}
	patchApp(t, app.GetName(), rollingSyncOperation)
	var first []byte
	var request string
	poll.UntilState(t, "the RollingSync request in the ManifestWork", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := readWork(ctx)
		first = cur.Spec.Workload.Manifests[0].Raw
		request = cur.Annotations[pullmodel.AnnotationOperationRequest]
		return propagation.Operation(cur) != nil && request != "" && propagation.RequestName(propagation.OperationAsSent(cur)) == request, fmt.Sprintf("operation %v annotations %v", propagation.OperationAsSent(cur), cur.Annotations)
	})

	// Running on the spoke: the request stays on the hub (Argo CD keeps `operation` until the
	// operation has finished), and the running operation shows.
	s.SetFeedback(t, w, map[string]string{"healthStatus": "Missing", "syncStatus": "OutOfSync", "syncRevision": "abc123", "reconciledAt": "2026-01-01T00:00:10Z",
		"operationStatePhase": "Running", "operationStateStartedAt": "2026-01-01T00:00:10Z", "operationStateRequest": request})
	poll.UntilState(t, "the running operation shown on the hub", 10*time.Second, func(ctx context.Context) (bool, string) {
		phase, _, _ := unstructured.NestedString(s.GetApp(t, app.GetName()).Object, "status", "operationState", "phase")
		return phase == "Running", phase
	})
	if _, ok := s.GetApp(t, app.GetName()).Object["operation"]; !ok {
		t.Fatal("the hub's sync request was cleared while the spoke was still running it")
	}

	// Finished on the spoke: cleared on the hub, in the same write that shows the finished
	// operation, and taken out of the ManifestWork.
	finished := map[string]string{"healthStatus": "Progressing", "syncStatus": "Synced", "syncRevision": "abc123", "reconciledAt": "2026-01-01T00:00:12Z",
		"operationStatePhase": "Succeeded", "operationStateStartedAt": "2026-01-01T00:00:10Z", "operationStateFinishedAt": "2026-01-01T00:00:11Z", "operationStateRequest": request}
	s.SetFeedback(t, w, finished)
	poll.UntilState(t, "the hub's sync request cleared once the spoke finished it", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := s.GetApp(t, app.GetName())
		_, has := cur.Object["operation"]
		phase, _, _ := unstructured.NestedString(cur.Object, "status", "operationState", "phase")
		limit, _, _ := unstructured.NestedInt64(cur.Object, "status", "operationState", "operation", "retry", "limit")
		return !has && phase == "Succeeded" && limit == 5, fmt.Sprintf("operation present=%v phase=%s operationState.operation.retry.limit=%d", has, phase, limit)
	})
	poll.UntilState(t, "the ManifestWork without the operation", 10*time.Second, func(ctx context.Context) (bool, string) {
		return propagation.Operation(readWork(ctx)) == nil, "still carries it"
	})

	// The same request again: delivered again, under a new name, so with a payload that
	// differs from the first delivery (the work agent applies a payload only when it changed).
	patchApp(t, app.GetName(), rollingSyncOperation)
	var again string
	poll.UntilState(t, "the repeated request delivered anew", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := readWork(ctx)
		again = cur.Annotations[pullmodel.AnnotationOperationRequest]
		ok := propagation.Operation(cur) != nil && again != "" && again != request && propagation.RequestName(propagation.OperationAsSent(cur)) == again
		return ok && !jsonEqual(cur.Spec.Workload.Manifests[0].Raw, first), fmt.Sprintf("operation %v annotations %v", propagation.OperationAsSent(cur), cur.Annotations)
	})
	second := readWork(context.Background()).Spec.Workload.Manifests[0].Raw
	// Run within the same second as the first run: only its name says it is the new request's.
	finished["operationStateRequest"] = again
	s.SetFeedback(t, w, finished)
	poll.UntilState(t, "the second run cleared too", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := s.GetApp(t, app.GetName())
		_, has := cur.Object["operation"]
		shown, _, _ := unstructured.NestedSlice(cur.Object, "status", "operationState", "operation", "info")
		return !has && strings.Contains(fmt.Sprint(shown), again), fmt.Sprintf("operation present=%v operationState.operation.info=%v", has, shown)
	})

	// And a third time.
	patchApp(t, app.GetName(), rollingSyncOperation)
	poll.UntilState(t, "the third request delivered anew", 10*time.Second, func(ctx context.Context) (bool, string) {
		cur := readWork(ctx)
		third := cur.Annotations[pullmodel.AnnotationOperationRequest]
		return propagation.Operation(cur) != nil && third != "" && third != again &&
			!jsonEqual(cur.Spec.Workload.Manifests[0].Raw, second), fmt.Sprintf("annotations %v", cur.Annotations)
	})
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
