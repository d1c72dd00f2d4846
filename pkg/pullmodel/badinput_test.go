package pullmodel_test

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
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
)

// waitRefused waits for the delivery condition with reason on the Application, and a Warning
// Event with the same reason, and checks no ManifestWork was made.
func waitRefused(t *testing.T, app *unstructured.Unstructured, cluster, reason string) {
	t.Helper()
	waitRefusedIn(t, argoNS, app.GetName(), reason)
	cur := getApp(t, app.GetName())
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: cluster, Name: pullmodel.WorkName(cur.GetName(), string(cur.GetUID()))}, &workv1.ManifestWork{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("%s: a ManifestWork exists (%v) although delivery was refused", app.GetName(), err)
	}
}

// waitDelivered waits until the condition is gone and the ManifestWork exists.
func waitDelivered(t *testing.T, name, cluster string) {
	t.Helper()
	eventually(t, name+": condition cleared", 10*time.Second, func(ctx context.Context) (bool, string) {
		msg, ok := pullmodel.DeliveryCondition(getApp(t, name))
		return !ok, msg
	})
	waitWork(t, getApp(t, name), cluster)
}

// TestBadInput: an unknown cluster, a cluster the hub has not accepted, no cluster named, a
// missing skip-reconcile and an Application too large for one ManifestWork each get a readable
// condition and a Warning Event, no ManifestWork and no crash loop; fixing the input delivers.
func TestBadInput(t *testing.T) {
	ctx := context.Background()

	unknown := newApp("bad-unknown", "nowhere")
	create(t, unknown)
	waitRefused(t, unknown, "nowhere", propagation.ReasonUnknownCluster)
	createCluster(t, "nowhere", true)
	waitDelivered(t, unknown.GetName(), "nowhere")

	createCluster(t, "pending1", false)
	pending := newApp("bad-pending", "pending1")
	create(t, pending)
	waitRefused(t, pending, "pending1", propagation.ReasonClusterNotAccepted)
	mc := &clusterv1.ManagedCluster{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "pending1"}, mc); err != nil {
		t.Fatal(err)
	}
	mc.Spec.HubAcceptsClient = true
	if err := k8s.Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, pending.GetName(), "pending1")

	createCluster(t, "bad1", true)
	noSkip := newApp("bad-noskip", "bad1")
	a := noSkip.GetAnnotations()
	delete(a, pullmodel.AnnotationSkipReconcile)
	noSkip.SetAnnotations(a)
	create(t, noSkip)
	waitRefused(t, noSkip, "bad1", propagation.ReasonMissingSkipReconcile)
	patchApp(t, noSkip.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, pullmodel.AnnotationSkipReconcile))
	waitDelivered(t, noSkip.GetName(), "bad1")

	noCluster := newApp("bad-nocluster", "")
	create(t, noCluster)
	eventually(t, "condition "+propagation.ReasonMissingCluster, 10*time.Second, func(ctx context.Context) (bool, string) {
		msg, _ := pullmodel.DeliveryCondition(getApp(t, noCluster.GetName()))
		return strings.HasPrefix(msg, propagation.ReasonMissingCluster+": "), msg
	})
	patchApp(t, noCluster.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"bad1"}}}`, pullmodel.AnnotationCluster))
	waitDelivered(t, noCluster.GetName(), "bad1")

	// Inline Helm values of 600 KiB: fine for etcd (1.5 MiB), too much for one ManifestWork.
	big := newApp("bad-big", "bad1")
	if err := unstructured.SetNestedField(big.Object, strings.Repeat("x", 600*1024), "spec", "source", "helm", "values"); err != nil {
		t.Fatal(err)
	}
	create(t, big)
	waitRefused(t, big, "bad1", propagation.ReasonTooLarge)
	msg, _ := pullmodel.DeliveryCondition(getApp(t, big.GetName()))
	if !strings.Contains(msg, "500 KiB") {
		t.Errorf("too-large message %q does not say the limit", msg)
	}
}
