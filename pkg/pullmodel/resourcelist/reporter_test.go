package resourcelist_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestResourceReporterOnTheCluster runs the reporter's manager, as the resource-reporter
// command builds it, authenticated as its ServiceAccount with only the rights its manifests
// grant (this API server plays the managed cluster): it annotates the Applications the pull
// model marked (and those of an ApplicationSet, which earlier hubs marked alone) with the
// objects they deploy, follows changes of the list and not of health, removes the annotation
// when the list empties, and leaves other Applications alone.
func TestResourceReporterOnTheCluster(t *testing.T) {
	const ns = "reporter-argocd"
	env := testenv.StartForTest(t, testenv.Options{WithArgoCD: true})
	c := env.Client
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	create := func(o client.Object) {
		t.Helper()
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	for _, o := range resourcelist.Objects(ns, "argocd-agent-addon:test") {
		create(o)
	}
	cfg := testenv.ServiceAccount(ns, resourcelist.Name).Impersonating(env.Config)
	mgr, err := resourcelist.NewManager(cfg, ns, "0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reporter: %v", err)
		}
	}()

	resource := func(kind, name, health string) map[string]any {
		return map[string]any{"version": "v1", "kind": kind, "namespace": "guestbook", "name": name, "status": "Synced", "health": map[string]any{"status": health}}
	}
	app := func(name string, mark string, resources ...any) *unstructured.Unstructured {
		a := pullmodel.NewApplication()
		a.SetNamespace(ns)
		a.SetName(name)
		if mark != "" {
			a.SetLabels(map[string]string{mark: "true"})
		}
		a.Object["spec"] = map[string]any{"project": "default", "source": map[string]any{"repoURL": "https://example.com/repo.git"},
			"destination": map[string]any{"server": pullmodel.InClusterServer, "namespace": "guestbook"}}
		a.Object["status"] = map[string]any{"resources": resources}
		return a
	}
	annotation := func(ctx context.Context, name string) (string, bool, error) {
		a := pullmodel.NewApplication()
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, a); err != nil {
			return "", false, err
		}
		v, ok := a.GetAnnotations()[pullmodel.AnnotationResourceList]
		return v, ok, nil
	}
	setResources := func(name string, resources ...any) {
		t.Helper()
		a := pullmodel.NewApplication()
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, a); err != nil {
			t.Fatal(err)
		}
		a.Object["status"] = map[string]any{"resources": resources}
		if err := c.Update(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what, name string, want []resourcelist.Resource) {
		t.Helper()
		poll.UntilState(t, what, 30*time.Second, func(ctx context.Context) (bool, string) {
			v, present, err := annotation(ctx, name)
			if err != nil {
				return false, err.Error()
			}
			if want == nil {
				return !present, "annotation " + v
			}
			return v == resourcelist.Encode(want), "annotation " + v
		})
	}
	svc := resourcelist.Resource{Version: "v1", Kind: "Service", Namespace: "guestbook", Name: "guestbook-ui"}
	cm := resourcelist.Resource{Version: "v1", Kind: "ConfigMap", Namespace: "guestbook", Name: "settings"}

	create(app("reported", pullmodel.LabelApplicationSet, resource("Service", "guestbook-ui", "Progressing")))
	create(app("standalone", resourcelist.LabelReported, resource("ConfigMap", "settings", "Healthy")))
	create(app("own", "", resource("Service", "guestbook-ui", "Healthy")))
	waitFor("the ApplicationSet's Application lists its Service", "reported", []resourcelist.Resource{svc})
	waitFor("a standalone delivered Application lists its ConfigMap", "standalone", []resourcelist.Resource{cm})

	setResources("reported", resource("Service", "guestbook-ui", "Healthy"), resource("ConfigMap", "settings", "Healthy"))
	waitFor("a new object is listed", "reported", []resourcelist.Resource{svc, cm})

	setResources("reported")
	waitFor("no objects: the annotation goes", "reported", nil)

	if v, present, err := annotation(ctx, "own"); err != nil || present {
		t.Fatalf("an Application the pull model did not deliver was annotated: %q %v", v, err)
	}
}
