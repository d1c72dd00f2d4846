package pulltest

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
)

// CreateDelivered creates a NewApp of that name for cluster and its ManifestWork as the
// propagation builds it, without a manager: for tests that run one reconciler by hand. It
// returns both as stored.
func CreateDelivered(ctx context.Context, t testing.TB, c client.Client, name, cluster string) (*unstructured.Unstructured, *workv1.ManifestWork) {
	t.Helper()
	app := NewApp(name, cluster)
	if err := c.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	w, err := propagation.Build(propagation.Input{App: app})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	return app, w
}
