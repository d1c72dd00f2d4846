package propagation

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
)

func testSealer(t *testing.T) *seal.Sealer {
	t.Helper()
	s, err := seal.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSweep: the periodic safety net deletes pull-model ManifestWorks whose Application is
// gone, unmarked, re-created (another UID) or moved to another cluster, and keeps the current
// one and works it did not make.
func TestSweep(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := workv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	app := hubApp() // team-a/guestbook, UID 0123456789, cluster c1
	unmarked := hubApp()
	unmarked.SetName("unmarked")
	unmarked.SetLabels(nil)
	sealer := testSealer(t)
	work := func(ns, name, appName string) *workv1.ManifestWork {
		w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{pullmodel.LabelPull: "true"}}}
		if appName != "" {
			w.Annotations = map[string]string{pullmodel.AnnotationHubAppNamespace: "team-a", pullmodel.AnnotationHubAppName: appName}
			w.Annotations[seal.Annotation] = sealer.Sign(SealFields(w))
		}
		return w
	}
	// What a work agent can do to a ManifestWork of its namespace it did not get from the pull
	// model: label and annotate it as one, naming an Application that does not exist.
	forged := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "addon-argocd-agent-deploy-0",
		Labels:      map[string]string{pullmodel.LabelPull: "true"},
		Annotations: map[string]string{pullmodel.AnnotationHubAppNamespace: "team-a", pullmodel.AnnotationHubAppName: "gone", seal.Annotation: "forged"}}}
	// ... or copy the seal of a real one onto it.
	copied := work("c1", "other-abcde", "gone")
	copied.Name = "addon-other-deploy-0"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		app, unmarked,
		work("c1", "guestbook-01234", "guestbook"), // current: kept
		work("c1", "guestbook-99999", "guestbook"), // an earlier incarnation
		work("c2", "guestbook-01234", "guestbook"), // a cluster it left
		work("c1", "gone-abcde", "gone"),           // Application deleted
		work("c1", "unmarked-01234", "unmarked"),   // label removed
		work("c1", "foreign", ""),                  // not made from an Application: kept
		forged, copied,                             // labelled by a work agent: kept
	).Build()
	n, err := Sweep(context.Background(), sealer, c, c, c)
	if err != nil {
		t.Fatal(err)
	}
	list := &workv1.ManifestWorkList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, w := range list.Items {
		left = append(left, w.Namespace+"/"+w.Name)
	}
	want := []string{"c1/addon-argocd-agent-deploy-0", "c1/addon-other-deploy-0", "c1/foreign", "c1/guestbook-01234"}
	if n != 4 || strings.Join(left, " ") != strings.Join(want, " ") {
		t.Errorf("deleted %d, left %v; want 4 deleted and %v kept", n, left, want)
	}

	// A cache that has not seen an Application yet deletes nothing the API server still wants.
	behind := fake.NewClientBuilder().WithScheme(scheme).WithObjects(work("c1", "guestbook-01234", "guestbook")).Build()
	if n, err := Sweep(context.Background(), sealer, behind, c, behind); err != nil || n != 0 {
		t.Errorf("with a cache behind the API server: deleted %d (%v), want 0", n, err)
	}
}
