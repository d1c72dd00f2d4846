package propagation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// behind is the pull model's cache before it has seen one Application: reads of it find
// nothing, as they do between the Application's creation and its watch event.
type behind struct {
	cache.Cache
	unseen types.NamespacedName
}

func (b behind) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*unstructured.Unstructured); ok && key == b.unseen && obj.GetObjectKind().GroupVersionKind().Kind == "Application" {
		return apierrors.NewNotFound(pullmodel.ArgoGroupVersion.WithResource("applications").GroupResource(), key.Name)
	}
	return b.Cache.Get(ctx, key, obj, opts...)
}

func (b behind) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := b.Cache.List(ctx, list, opts...); err != nil {
		return err
	}
	if u, ok := list.(*unstructured.UnstructuredList); ok {
		kept := u.Items[:0]
		for _, item := range u.Items {
			if item.GetKind() != "Application" || client.ObjectKeyFromObject(&item) != b.unseen {
				kept = append(kept, item)
			}
		}
		u.Items = kept
	}
	return nil
}

// TestProjectWorkKeptForAnApplicationTheCacheHasNotSeen: the project controller's cache says
// no Application of the cluster names the AppProject any more, but the API server holds one
// created just now. The project's ManifestWork stays: the deletion is confirmed by a live read
// first. Once that Application is gone too, the ManifestWork goes.
func TestProjectWorkKeptForAnApplicationTheCacheHasNotSeen(t *testing.T) {
	// An API server of its own, not the package's Suite: the manager running there would deliver
	// this Application and keep the project's ManifestWork itself, while this test makes each
	// pass of the project controller and reads what that one pass did.
	env := testenv.StartForTest(t, testenv.Options{WithArgoCD: true})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := env.Client
	const argoNS, cluster, set, project = "argocd", "live-project1", "live-set", "team"

	cfg := pullmodelsetup.DefaultConfig()
	cfg.Policy.ArgoCDNamespace, cfg.Policy.SpokeNamespace = argoNS, argoNS
	appProject := func(name string) *unstructured.Unstructured {
		p := propagation.NewAppProject()
		p.SetNamespace(argoNS)
		p.SetName(name)
		p.Object["spec"] = map[string]any{"sourceRepos": []any{"*"}, "destinations": []any{map[string]any{"server": "*", "namespace": "*"}}}
		return p
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argoNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cluster}},
		&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: set}},
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: set}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: set}},
		&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster, Labels: map[string]string{clusterv1beta2.ClusterSetLabel: set}}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}},
		appProject("default"), appProject(project),
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}

	informers := pulltest.StartPullCache(ctx, t, env, cfg)
	sealer, err := seal.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}

	// The project's ManifestWork, as the controller wrote it for an Application since deleted.
	pw, err := propagation.BuildProjectWork(cluster, argoNS, appProject(project))
	if err != nil {
		t.Fatal(err)
	}
	pw.Annotations[seal.Annotation] = sealer.Sign(propagation.ProjectSealFields(pw))
	if err := c.Create(ctx, pw); err != nil {
		t.Fatal(err)
	}
	// An Application created just now names the project on the cluster.
	app := pullmodel.NewApplication()
	app.SetNamespace(argoNS)
	app.SetName("fresh")
	app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
	app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: cluster, pullmodel.AnnotationSkipReconcile: "true"})
	app.Object["spec"] = map[string]any{"project": project,
		"source":      map[string]any{"repoURL": "https://git.example/guestbook", "path": "guestbook"},
		"destination": map[string]any{"name": "in-cluster", "namespace": "guestbook"}}
	if err := c.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the project's ManifestWork in the cache", 10*time.Second, func() error {
		return informers.Get(ctx, client.ObjectKeyFromObject(pw), &workv1.ManifestWork{})
	})

	r := &propagation.Reconciler{Client: c, APIReader: c, Cache: behind{informers, client.ObjectKeyFromObject(app)}, Policy: cfg.Policy, Sealer: sealer, Now: time.Now}
	if _, err := r.ReconcileProjectWork(ctx, cluster, project); err != nil {
		t.Fatal(err)
	}
	live := &workv1.ManifestWork{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pw), live); err != nil || live.DeletionTimestamp != nil {
		t.Fatalf("the project's ManifestWork after a pass whose cache lacks the Application that needs it: %v, deleting %v; want it kept", err, live.DeletionTimestamp)
	}

	// Without that Application, nothing needs it: it goes.
	if err := c.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReconcileProjectWork(ctx, cluster, project); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pw), live); !apierrors.IsNotFound(err) && (err != nil || live.DeletionTimestamp == nil) {
		t.Errorf("the project's ManifestWork once no Application needs it: %v; want it deleted", err)
	}

	// The hub AppProject deleted while an Application still names it: there is nothing left
	// to deliver. The ManifestWork goes (the cluster keeps its copy, orphaned) and the key is
	// not polled while the Application stays.
	poll.Until(t, "the project's ManifestWork gone", 10*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pw), &workv1.ManifestWork{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	pw.ResourceVersion = ""
	if err := c.Create(ctx, pw); err != nil {
		t.Fatal(err)
	}
	app.SetResourceVersion("")
	app.SetName("stays")
	if err := c.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	// And its ManifestWork, delivering it under the project.
	aw, err := propagation.Build(propagation.Input{App: app})
	if err != nil {
		t.Fatal(err)
	}
	aw.Annotations[seal.Annotation] = sealer.Sign(propagation.SealFields(aw))
	if err := c.Create(ctx, aw); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, appProject(project)); err != nil {
		t.Fatal(err)
	}
	r.Cache = informers
	poll.Until(t, "the cache without the AppProject and with the Application", 10*time.Second, func() error {
		if err := informers.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: project}, propagation.NewAppProject()); !apierrors.IsNotFound(err) {
			return fmt.Errorf("AppProject: %v", err)
		}
		if err := informers.Get(ctx, client.ObjectKeyFromObject(aw), &workv1.ManifestWork{}); err != nil {
			return err
		}
		return informers.Get(ctx, client.ObjectKeyFromObject(app), pullmodel.NewApplication())
	})
	res, err := r.ReconcileProjectWork(ctx, cluster, project)
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("a pass over a deleted AppProject's ManifestWork asks to come back after %s: it would poll for as long as the Application stays", res.RequeueAfter)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pw), live); !apierrors.IsNotFound(err) && (err != nil || live.DeletionTimestamp == nil) {
		t.Errorf("the ManifestWork of a deleted AppProject: %v; want it deleted", err)
	}
}
