package propagation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// spokePlaces are the namespaces a ManifestWork puts its Application and the Application's
// feedback rule in, and the namespace the ManifestWork of the Application's AppProject on the
// same cluster puts the project in.
func spokePlaces(t *testing.T, w *workv1.ManifestWork) (app, project, feedback string) {
	t.Helper()
	spoke := payload(t, w)
	app = spoke.GetNamespace()
	name, _, _ := unstructured.NestedString(spoke.Object, "spec", "project")
	pw := &workv1.ManifestWork{}
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: w.Namespace, Name: propagation.ProjectWorkName(name)}, pw); err == nil && len(pw.Spec.Workload.Manifests) == 1 {
		p := &unstructured.Unstructured{}
		if err := json.Unmarshal(pw.Spec.Workload.Manifests[0].Raw, &p.Object); err != nil {
			t.Fatal(err)
		}
		project = p.GetNamespace()
	}
	for _, c := range w.Spec.ManifestConfigs {
		if c.ResourceIdentifier.Resource == "applications" {
			feedback = c.ResourceIdentifier.Namespace
		}
	}
	return app, project, feedback
}

// TestMixedFleetSpokeNamespaces: one hub serves an OpenShift GitOps cluster (label
// openshift-gitops) and a plain Argo CD cluster (no label: the manager's default, argocd); each
// gets its Applications, AppProjects and feedback in its own namespace. A label that is
// not a namespace name is refused with a condition and an Event and delivers nothing; fixing it
// delivers. Changing the label of a cluster with deliveries moves nothing: the delivered
// Application stays where it is and the hub Application says why.
func TestMixedFleetSpokeNamespaces(t *testing.T) {
	ctx := context.Background()
	s.Create(t, pulltest.AppProject(pulltest.ArgoNS, "mixed", nil))
	s.CreateCluster(t, "mix-ocp", true)
	s.CreateCluster(t, "mix-plain", true)
	s.CreateCluster(t, "mix-bad", true)
	label := func(cluster, value string) {
		t.Helper()
		mc := &clusterv1.ManagedCluster{}
		if err := s.Client.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
			t.Fatal(err)
		}
		if value == "" {
			delete(mc.Labels, propagation.LabelSpokeNamespace)
		} else {
			mc.Labels[propagation.LabelSpokeNamespace] = value
		}
		if err := s.Client.Update(ctx, mc); err != nil {
			t.Fatal(err)
		}
	}
	label("mix-ocp", "openshift-gitops")
	label("mix-bad", "Not_A_Namespace")

	newMixed := func(name, cluster string) *unstructured.Unstructured {
		app := pulltest.NewApp(name, cluster)
		_ = unstructured.SetNestedField(app.Object, "mixed", "spec", "project")
		s.Create(t, app)
		return s.GetApp(t, name)
	}
	for cluster, want := range map[string]string{"mix-ocp": "openshift-gitops", "mix-plain": pulltest.ArgoNS} {
		app := newMixed("mix-app-"+cluster, cluster)
		w := s.WaitWork(t, app, cluster)
		a, p, f := spokePlaces(t, w)
		if a != want || p != want || f != want {
			t.Errorf("cluster %s: Application in %q, AppProject in %q, feedback from %q; want all in %q", cluster, a, p, f, want)
		}
	}

	// The Application's author cannot pick another cluster's namespace.
	asks := pulltest.NewApp("mix-asks", "mix-ocp")
	asks.SetAnnotations(mergeMap(asks.GetAnnotations(), map[string]string{pullmodel.AnnotationAppNamespace: pulltest.ArgoNS}))
	s.Create(t, asks)
	waitRefused(t, asks, "mix-ocp", propagation.ReasonSpokeNamespaceNotAllowed)

	bad := newMixed("mix-app-bad", "mix-bad")
	waitRefused(t, bad, "mix-bad", propagation.ReasonBadSpokeNamespace)
	label("mix-bad", "gitops")
	waitDelivered(t, bad.GetName(), "mix-bad")
	if a, p, f := spokePlaces(t, s.WaitWork(t, bad, "mix-bad")); a != "gitops" || p != "gitops" || f != "gitops" {
		t.Errorf("after the fix: Application in %q, AppProject in %q, feedback from %q; want gitops", a, p, f)
	}

	// A new label for a cluster with deliveries: the delivered Application stays in the old
	// namespace (moving it would delete its workload) and the hub Application says so.
	label("mix-ocp", "gitops-2")
	moved := s.GetApp(t, "mix-app-mix-ocp")
	waitRefusedIn(t, pulltest.ArgoNS, moved.GetName(), propagation.ReasonSpokePlaceChanged)
	w := s.WaitWork(t, moved, "mix-ocp")
	if a, _, f := spokePlaces(t, w); a != "openshift-gitops" || f != "openshift-gitops" {
		t.Errorf("after the label changed: Application in %q, feedback from %q; want it left in openshift-gitops", a, f)
	}
	// A new Application for that cluster goes to the new namespace.
	fresh := newMixed("mix-app-fresh", "mix-ocp")
	if a, _, _ := spokePlaces(t, s.WaitWork(t, fresh, "mix-ocp")); a != "gitops-2" {
		t.Errorf("new Application after the label changed is in %q, want gitops-2", a)
	}
	// Back to the old value: the first one is delivered again, where it was.
	label("mix-ocp", "openshift-gitops")
	poll.UntilState(t, "condition cleared after the label came back", 10*time.Second, func(ctx context.Context) (bool, string) {
		msg, ok := pullmodel.DeliveryCondition(s.GetApp(t, moved.GetName()))
		return !ok, fmt.Sprint(msg)
	})
}
