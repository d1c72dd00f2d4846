package propagation_test

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// TestWakingEveryApplicationCopiesNone: a ManagedClusterSetBinding's event wakes the project
// ManifestWork of every Application of its namespace, reading each Application's cluster and
// project from the cache. Copies of all of them, held at once, were the manager's largest burst
// of memory as it started on a hub of 10,000 Applications (about 130 MB): the wake-up may
// allocate a little per Application, never a copy of it.
func TestWakingEveryApplicationCopiesNone(t *testing.T) {
	// An API server of its own: the package's manager would reconcile the Applications too.
	const argoNS, apps, clusters = pulltest.ArgoNS, 200, 20
	env, ctx := pulltest.StartOwnEnv(t, argoNS)
	c := env.Client
	for i := range apps {
		app := pullmodel.NewApplication()
		app.SetNamespace(argoNS)
		app.SetName(fmt.Sprintf("app-%03d", i))
		app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
		app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: fmt.Sprintf("cluster-%02d", i%clusters), pullmodel.AnnotationSkipReconcile: "true"})
		app.Object["spec"] = map[string]any{"project": "team",
			"source":      map[string]any{"repoURL": "https://git.example/apps", "path": fmt.Sprintf("apps/%d", i), "targetRevision": "main"},
			"destination": map[string]any{"server": pullmodel.InClusterServer, "namespace": "apps"}}
		// Argo CD's Application has no status subresource: the status is written with it.
		name := app.GetName()
		app.Object["status"] = map[string]any{"sync": map[string]any{"status": "Synced"}, "health": map[string]any{"status": "Healthy"},
			"resources": []any{
				map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "apps", "name": name},
				map[string]any{"version": "v1", "kind": "Service", "namespace": "apps", "name": name},
				map[string]any{"version": "v1", "kind": "ConfigMap", "namespace": "apps", "name": name + "-settings"},
			}}
		if err := c.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
	}

	cfg := pullmodelsetup.DefaultConfig()
	cfg.Policy.ArgoCDNamespace, cfg.Policy.SpokeNamespace = argoNS, argoNS
	informers := pulltest.StartPullCache(ctx, t, env, cfg)
	poll.Until(t, "every Application in the cache", 10*time.Second, func() error {
		list := pullmodel.NewApplicationList()
		if err := informers.List(ctx, list, client.InNamespace(argoNS)); err != nil || len(list.Items) != apps {
			return fmt.Errorf("%d of %d (%v)", len(list.Items), apps, err)
		}
		return nil
	})
	r := &propagation.Reconciler{Client: c, APIReader: c, Cache: informers, Policy: cfg.Policy, Now: time.Now}

	var keys []types.NamespacedName
	allocated := pulltest.LeastAllocated(5, func() {
		keys = keys[:0]
		for _, k := range r.ProjectKeysOfNamespace(ctx, argoNS) {
			keys = append(keys, k.NamespacedName)
		}
	})
	if len(keys) != clusters {
		t.Fatalf("woke %d project ManifestWorks, want one per cluster (%d): %v", len(keys), clusters, keys)
	}
	for _, k := range keys {
		if k.Name != "team" {
			t.Errorf("woke %s, want the project team on every cluster", k)
		}
	}
	// Copying an Application of this size costs about 5.5 KB; the wake-up's own bookkeeping
	// (its requests, the empty object each read goes into) about 1 KB.
	perApp := allocated / apps
	t.Logf("%d bytes allocated per Application woken", perApp)
	if perApp > 1536 {
		t.Errorf("waking the project ManifestWorks of %d Applications allocated %d bytes per Application: copies of them", apps, perApp)
	}
}
