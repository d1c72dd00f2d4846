package propagation

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
)

func hubApp() *unstructured.Unstructured {
	app := pullmodel.NewApplication()
	app.SetNamespace("team-a")
	app.SetName("guestbook")
	app.SetUID("0123456789")
	app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
	app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: "c1", pullmodel.AnnotationSkipReconcile: "true"})
	app.Object["spec"] = map[string]any{"project": "default", "destination": map[string]any{"name": "hub-name", "server": "https://hub", "namespace": "gb"}}
	return app
}

func TestBuildIsStableAndComparesEqualToItsStoredForm(t *testing.T) {
	a, err := Build(Input{App: hubApp()})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Build(Input{App: hubApp()})
	if NeedsUpdate(a, b) {
		t.Fatal("two builds of the same Application differ")
	}
	// Build writes what the CRD defaults, so a stored ManifestWork compares equal without a copy.
	if c := a.Spec.ManifestConfigs[0]; c.FeedbackScrapeType != workv1.FeedbackPollType || c.UpdateStrategy.ServerSideApply.FieldManager != workv1.DefaultFieldManager {
		t.Errorf("built without the CRD's defaults: scrape type %q, field manager %q", c.FeedbackScrapeType, c.UpdateStrategy.ServerSideApply.FieldManager)
	}
	// The API server re-encodes the manifest.
	stored := a.DeepCopy()
	stored.Spec.Workload.Manifests[0].Raw = []byte(" " + string(a.Spec.Workload.Manifests[0].Raw))
	stored.Labels["someone-else"] = "x"
	if NeedsUpdate(stored, b) {
		t.Error("the stored form with defaults and another writer's label compares different: every reconcile would write")
	}
	// An older hub CRD without feedbackScrapeType prunes it, and so the field manager's default.
	pruned := stored.DeepCopy()
	pruned.Spec.ManifestConfigs[0].FeedbackScrapeType = ""
	pruned.Spec.ManifestConfigs[0].UpdateStrategy.ServerSideApply.FieldManager = ""
	if NeedsUpdate(pruned, b) {
		t.Error("the stored form without the defaults an older CRD leaves out compares different: every reconcile would write")
	}
	if a.Namespace != "c1" || a.Name != "guestbook-01234" {
		t.Errorf("ManifestWork %s/%s", a.Namespace, a.Name)
	}
}

// TestBuildSharesNoListBetweenManifestWorks: a write decodes the API server's answer into the
// ManifestWork it sent, in place. Every ManifestWork carried one package-level ignoreFields list,
// which concurrent reconciles then wrote at once.
func TestBuildSharesNoListBetweenManifestWorks(t *testing.T) {
	ignored := func() []workv1.IgnoreField {
		w, err := Build(Input{App: hubApp()})
		if err != nil {
			t.Fatal(err)
		}
		return w.Spec.ManifestConfigs[0].UpdateStrategy.ServerSideApply.IgnoreFields
	}
	a, b := ignored(), ignored()
	if len(a) == 0 || len(a[0].JSONPaths) == 0 {
		t.Fatal("no ignoreFields: nothing to check")
	}
	if &a[0] == &b[0] || &a[0].JSONPaths[0] == &b[0].JSONPaths[0] {
		t.Error("two ManifestWorks share their ignoreFields list")
	}
}

func TestNeedsUpdateSeesDroppedApplicationSet(t *testing.T) {
	app := hubApp()
	app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "set"}})
	owned, _ := Build(Input{App: app})
	plain, _ := Build(Input{App: hubApp()})
	if !NeedsUpdate(owned, plain) {
		t.Error("a ManifestWork still naming an ApplicationSet the Application left compares equal")
	}
}

func TestSpokeApplicationDestination(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        map[string]any
	}{
		{"default: its own cluster", nil, map[string]any{"server": pullmodel.InClusterServer, "namespace": "gb"}},
		{"name annotation", map[string]string{pullmodel.AnnotationDestinationName: "in-cluster"}, map[string]any{"name": "in-cluster", "namespace": "gb"}},
		{"server annotation", map[string]string{pullmodel.AnnotationDestinationServer: "https://x"}, map[string]any{"server": "https://x", "namespace": "gb"}},
	} {
		app := hubApp()
		a := app.GetAnnotations()
		for k, v := range tc.annotations {
			a[k] = v
		}
		app.SetAnnotations(a)
		dest, _, _ := unstructured.NestedMap(SpokeApplication(app, SpokePlace(DefaultPolicy(), app)).Object, "spec", "destination")
		if len(dest) != len(tc.want) {
			t.Errorf("%s: destination %v, want %v", tc.name, dest, tc.want)
		}
		for k, v := range tc.want {
			if dest[k] != v {
				t.Errorf("%s: destination %v, want %v", tc.name, dest, tc.want)
			}
		}
		// The hub object is not changed.
		if d, _, _ := unstructured.NestedString(app.Object, "spec", "destination", "server"); d != "https://hub" {
			t.Errorf("%s: the hub Application's destination was modified: %s", tc.name, d)
		}
	}
}

func TestBuildRefusesTooLarge(t *testing.T) {
	app := hubApp()
	_ = unstructured.SetNestedField(app.Object, strings.Repeat("v", MaxWorkBytes), "spec", "source", "helm", "values")
	_, err := Build(Input{App: app})
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("want TooLargeError, got %v", err)
	}
}

func TestChecks(t *testing.T) {
	app := hubApp()
	if r := checkSkipReconcile(app); r != nil {
		t.Errorf("skip-reconcile true refused: %v", r)
	}
	app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: "c1", pullmodel.AnnotationSkipReconcile: "false"})
	if r := checkSkipReconcile(app); r == nil || r.Reason != ReasonMissingSkipReconcile {
		t.Errorf("skip-reconcile false: %v", r)
	}
	if r := checkCluster(app, nil); r == nil || r.Reason != ReasonUnknownCluster || !strings.Contains(r.Message, `"c1"`) {
		t.Errorf("unknown cluster: %v", r)
	}
}

// TestReconcileTimeIsFedBackOnlyWhileARequestIsOutstanding: the spoke's Argo CD rewrites
// status.reconciledAt on every periodic refresh, so a rule for it would make the work agent
// write the ManifestWork's status every refresh of every Application; it is there only while a
// sync or refresh request is, which is when the hub needs it.
func TestReconcileTimeIsFedBackOnlyWhileARequestIsOutstanding(t *testing.T) {
	rules := func(w *workv1.ManifestWork) []string {
		var names []string
		for _, r := range w.Spec.ManifestConfigs[0].FeedbackRules {
			for _, p := range r.JsonPaths {
				names = append(names, p.Name)
			}
		}
		return names
	}
	idle, _ := Build(Input{App: hubApp()})
	if slices.Contains(rules(idle), FeedbackReconciledAt) {
		t.Errorf("idle Application's ManifestWork feeds back the reconcile time: %v", rules(idle))
	}
	for _, want := range []string{FeedbackHealth, FeedbackSync, FeedbackHealthMessage, FeedbackConditionTypes, FeedbackConditionMessages, FeedbackSyncRevisions} {
		if !slices.Contains(rules(idle), want) {
			t.Errorf("no feedback rule %s: %v", want, rules(idle))
		}
	}
	// A list index past a list's end is an error for OCM's work agent (its feedback condition
	// turns False), so lists are read with [*], never by index.
	for _, r := range idle.Spec.ManifestConfigs[0].FeedbackRules {
		for _, p := range r.JsonPaths {
			if regexp.MustCompile(`\[[0-9]+\]`).MatchString(p.Path) {
				t.Errorf("feedback rule %s reads a list by index: %s", p.Name, p.Path)
			}
		}
	}
	withOp := hubApp()
	withOp.Object["operation"] = map[string]any{"sync": map[string]any{"revision": "main"}}
	refresh := hubApp()
	refresh.SetAnnotations(map[string]string{pullmodel.AnnotationRefresh: "hard"})
	for name, app := range map[string]*unstructured.Unstructured{"sync request": withOp, "refresh request": refresh} {
		w, _ := Build(Input{App: app, RefreshBaseline: "2026-01-01T00:00:00Z"})
		if !slices.Contains(rules(w), FeedbackReconciledAt) {
			t.Errorf("%s: the reconcile time is not fed back: %v", name, rules(w))
		}
	}
	// An ApplicationSet's Application whose last sync finished after the last reconcile the hub
	// shows: progressive sync waits for the spoke's reconcile after the sync, which may come
	// after the sync request is cleared.
	synced := hubApp()
	synced.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: "set", UID: "u"}})
	synced.Object["status"] = map[string]any{"reconciledAt": "2026-01-01T00:00:00Z", "operationState": map[string]any{"finishedAt": "2026-01-01T00:00:05Z"}}
	if w, _ := Build(Input{App: synced}); !slices.Contains(rules(w), FeedbackReconciledAt) {
		t.Errorf("the reconcile after a finished sync is not fed back: %v", rules(w))
	}
	synced.Object["status"].(map[string]any)["reconciledAt"] = "2026-01-01T00:00:06Z"
	if w, _ := Build(Input{App: synced}); slices.Contains(rules(w), FeedbackReconciledAt) {
		t.Errorf("reconciled since the sync, still fed back: %v", rules(w))
	}
	synced.Object["status"].(map[string]any)["reconciledAt"] = "2026-01-01T00:00:00Z"
	synced.SetOwnerReferences(nil)
	if w, _ := Build(Input{App: synced}); slices.Contains(rules(w), FeedbackReconciledAt) {
		t.Errorf("without an ApplicationSet (no progressive sync), still fed back: %v", rules(w))
	}
	// The shared list is not grown by the builds that add the rule.
	again, _ := Build(Input{App: hubApp()})
	if len(rules(again)) != len(rules(idle)) {
		t.Errorf("rules grew: %d then %d", len(rules(idle)), len(rules(again)))
	}
}

// TestRequestsAreNotReappliedOnResync: OCM's work agent skips re-applying an unchanged manifest
// only when its manifest config has ignoreFields (it then applies by hash); without them its
// periodic resync would put back a refresh annotation or a sync request that the spoke's Argo
// CD cleared, and Argo CD would run it again.
func TestRequestsAreNotReappliedOnResync(t *testing.T) {
	refresh := hubApp()
	refresh.SetAnnotations(map[string]string{pullmodel.AnnotationRefresh: "hard"})
	withOp := hubApp()
	withOp.Object["operation"] = map[string]any{"sync": map[string]any{"revision": "main"}}
	for name, app := range map[string]*unstructured.Unstructured{"idle": hubApp(), "refresh request": refresh, "sync request": withOp} {
		w, err := Build(Input{App: app, RefreshBaseline: "2026-01-01T00:00:00Z"})
		if err != nil {
			t.Fatal(err)
		}
		cfg := w.Spec.ManifestConfigs[0]
		if cfg.ResourceIdentifier.Resource != "applications" {
			t.Fatalf("%s: first manifest config is for %s", name, cfg.ResourceIdentifier.Resource)
		}
		ssa := cfg.UpdateStrategy.ServerSideApply
		if cfg.UpdateStrategy.Type != workv1.UpdateStrategyTypeServerSideApply || ssa == nil || len(ssa.IgnoreFields) == 0 {
			t.Errorf("%s: the Application is not applied by hash (server-side apply with ignoreFields): %+v", name, cfg.UpdateStrategy)
			continue
		}
		for _, f := range ssa.IgnoreFields {
			// OnSpokePresent would strip the field from every apply: a request would never arrive.
			if f.Condition != workv1.IgnoreFieldsConditionOnSpokeChange {
				t.Errorf("%s: ignoreFields condition %s", name, f.Condition)
			}
		}
	}
}
