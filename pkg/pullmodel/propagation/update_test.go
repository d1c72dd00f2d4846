package propagation_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
)

// TestManifestWorkUpdate: a changed Application rewrites its ManifestWork's spec, labels and
// annotations at the version it read: a ManifestWork changed since is refused with a conflict
// (retried from the cache's newer copy), labels others put on it stay, the annotations the
// pull model no longer wants go, and the API server
// answers with the ManifestWork's metadata only, not the whole object with its status, which
// nothing reads.
func TestManifestWorkUpdate(t *testing.T) {
	env, ctx := pulltest.StartOwnEnv(t, pulltest.ArgoNS, "cluster-1")
	c := pulltest.NewPatchAnswers(t, env)
	r := &propagation.Reconciler{Client: c}

	app, have := pulltest.CreateDelivered(ctx, t, env.Client, "guestbook", "cluster-1")
	if err := unstructured.SetNestedField(app.Object, "v2", "spec", "source", "targetRevision"); err != nil {
		t.Fatal(err)
	}
	want, err := propagation.Build(propagation.Input{App: app})
	if err != nil {
		t.Fatal(err)
	}
	if !propagation.NeedsUpdate(have, want) {
		t.Fatal("the changed Application's ManifestWork needs no update")
	}

	// Someone else's label, and a sync request the Application no longer has, written after
	// the reconcile read the ManifestWork.
	stale := have.DeepCopy()
	have.Labels["example.com/other"] = "kept"
	have.Annotations[pullmodel.AnnotationOperationRequest] = "100"
	if err := env.Client.Update(ctx, have); err != nil {
		t.Fatal(err)
	}
	if wrote, err := r.Apply(ctx, stale, want); wrote || !apierrors.IsConflict(err) {
		t.Fatalf("an update at an older version: wrote %v, error %v; want a conflict", wrote, err)
	}
	if wrote, err := r.Apply(ctx, have, want); !wrote || err != nil {
		t.Fatalf("an update at the current version: wrote %v, error %v", wrote, err)
	}
	got := &workv1.ManifestWork{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(have), got); err != nil {
		t.Fatal(err)
	}
	if propagation.NeedsUpdate(got, want) {
		t.Errorf("the ManifestWork is not what the reconcile wanted: %+v", got.Spec)
	}
	if got.Labels["example.com/other"] != "kept" {
		t.Errorf("labels %v: the other writer's label went", got.Labels)
	}
	if _, ok := got.Annotations[pullmodel.AnnotationOperationRequest]; ok {
		t.Errorf("annotations %v: the name of a sync request the Application no longer has stayed", got.Annotations)
	}
	accepts := c.Accepts()
	if len(accepts) != 2 {
		t.Fatalf("%d PATCH requests, want 2", len(accepts))
	}
	for _, accept := range accepts {
		if !strings.Contains(accept, "as=PartialObjectMetadata") {
			t.Errorf("an update asked for the whole ManifestWork back (Accept: %s)", accept)
		}
	}
}
