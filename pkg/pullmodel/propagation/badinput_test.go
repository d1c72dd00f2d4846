package propagation_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// waitRefused waits for the delivery condition with reason on the Application, and a Warning
// Event with the same reason, and checks no ManifestWork was made.
func waitRefused(t *testing.T, app *unstructured.Unstructured, cluster, reason string) {
	t.Helper()
	waitRefusedIn(t, pulltest.ArgoNS, app.GetName(), reason)
	cur := s.GetApp(t, app.GetName())
	err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: cluster, Name: pullmodel.WorkName(cur.GetName(), string(cur.GetUID()))}, &workv1.ManifestWork{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("%s: a ManifestWork exists (%v) although delivery was refused", app.GetName(), err)
	}
}

// waitDelivered waits until the condition is gone and the ManifestWork exists.
func waitDelivered(t *testing.T, name, cluster string) {
	t.Helper()
	poll.UntilState(t, name+": condition cleared", 10*time.Second, func(ctx context.Context) (bool, string) {
		msg, ok := pullmodel.DeliveryCondition(s.GetApp(t, name))
		return !ok, msg
	})
	s.WaitWork(t, s.GetApp(t, name), cluster)
}

// TestBadInput: an unknown cluster, a cluster the hub has not accepted, no cluster named, a
// missing skip-reconcile and an Application too large for one ManifestWork each get a readable
// condition and a Warning Event, no ManifestWork and no crash loop; fixing the input delivers.
func TestBadInput(t *testing.T) {
	ctx := context.Background()

	unknown := pulltest.NewApp("bad-unknown", "nowhere")
	s.Create(t, unknown)
	waitRefused(t, unknown, "nowhere", propagation.ReasonUnknownCluster)
	s.CreateCluster(t, "nowhere", true)
	waitDelivered(t, unknown.GetName(), "nowhere")

	s.CreateCluster(t, "pending1", false)
	pending := pulltest.NewApp("bad-pending", "pending1")
	s.Create(t, pending)
	waitRefused(t, pending, "pending1", propagation.ReasonClusterNotAccepted)
	mc := &clusterv1.ManagedCluster{}
	if err := s.Client.Get(ctx, client.ObjectKey{Name: "pending1"}, mc); err != nil {
		t.Fatal(err)
	}
	mc.Spec.HubAcceptsClient = true
	if err := s.Client.Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, pending.GetName(), "pending1")

	s.CreateCluster(t, "bad1", true)
	noSkip := pulltest.NewApp("bad-noskip", "bad1")
	a := noSkip.GetAnnotations()
	delete(a, pullmodel.AnnotationSkipReconcile)
	noSkip.SetAnnotations(a)
	s.Create(t, noSkip)
	waitRefused(t, noSkip, "bad1", propagation.ReasonMissingSkipReconcile)
	patchApp(t, noSkip.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, pullmodel.AnnotationSkipReconcile))
	waitDelivered(t, noSkip.GetName(), "bad1")

	noCluster := pulltest.NewApp("bad-nocluster", "")
	s.Create(t, noCluster)
	poll.UntilState(t, "condition "+propagation.ReasonMissingCluster, 10*time.Second, func(ctx context.Context) (bool, string) {
		msg, _ := pullmodel.DeliveryCondition(s.GetApp(t, noCluster.GetName()))
		return strings.HasPrefix(msg, propagation.ReasonMissingCluster+": "), msg
	})
	patchApp(t, noCluster.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"bad1"}}}`, pullmodel.AnnotationCluster))
	waitDelivered(t, noCluster.GetName(), "bad1")

	// Inline Helm values of 600 KiB: fine for etcd (1.5 MiB), too much for one ManifestWork.
	big := pulltest.NewApp("bad-big", "bad1")
	if err := unstructured.SetNestedField(big.Object, strings.Repeat("x", 600*1024), "spec", "source", "helm", "values"); err != nil {
		t.Fatal(err)
	}
	s.Create(t, big)
	waitRefused(t, big, "bad1", propagation.ReasonTooLarge)
	msg, _ := pullmodel.DeliveryCondition(s.GetApp(t, big.GetName()))
	if !strings.Contains(msg, "500 KiB") {
		t.Errorf("too-large message %q does not say the limit", msg)
	}
}
