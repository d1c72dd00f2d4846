package setup_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestAPIServerRestart: the pull model keeps working in the same manager process across a
// kube-apiserver restart: an Application created after it is delivered, and a deletion made
// after it removes the ManifestWork.
func TestAPIServerRestart(t *testing.T) {
	e := testenv.StartForTest(t, testenv.Options{WithArgoCD: true})
	stop := pulltest.StartManager(e, nil)
	defer stop()
	ctx := context.Background()
	c := e.Client
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pulltest.ArgoNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restart1"}},
		pulltest.ManagedCluster("restart1"),
		pulltest.NewApp("before-restart", "restart1"),
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := pulltest.TenancySteps(ctx, c); err != nil {
		t.Fatal(err)
	}
	works := func(ctx context.Context) (map[string]bool, error) {
		list := &workv1.ManifestWorkList{}
		if err := c.List(ctx, list, client.InNamespace("restart1"), client.HasLabels{pullmodel.LabelPull}); err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for _, w := range list.Items {
			out[w.Annotations[pullmodel.AnnotationHubAppName]] = true
		}
		return out, nil
	}
	poll.UntilState(t, "delivered before the restart", 20*time.Second, func(ctx context.Context) (bool, string) {
		w, err := works(ctx)
		return err == nil && w["before-restart"], fmt.Sprint(w, err)
	})
	if err := e.RestartAPIServer(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "the API server back", time.Minute, func(ctx context.Context) (bool, string) {
		err := c.Create(ctx, pulltest.NewApp("after-restart", "restart1"))
		return err == nil, fmt.Sprint(err)
	})
	app := pullmodel.NewApplication()
	app.SetNamespace(pulltest.ArgoNS)
	app.SetName("before-restart")
	if err := c.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "after the restart: the new Application delivered, the deleted one's work removed", 90*time.Second, func(ctx context.Context) (bool, string) {
		w, err := works(ctx)
		return err == nil && w["after-restart"] && !w["before-restart"], fmt.Sprint(w, err)
	})
}
