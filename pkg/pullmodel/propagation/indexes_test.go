package propagation_test

import (
	"fmt"
	"testing"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// TestIndexesAreKeyedOnceAcrossNamespaces: the pull model's indexes hold each value once, read
// across namespaces, where controller-runtime's IndexField keys it twice (within the object's
// namespace too): for the indexes whose values name one object each, a second set of one per
// object. A List with client.MatchingFields finds the objects as before.
func TestIndexesAreKeyedOnceAcrossNamespaces(t *testing.T) {
	const argoNS, apps, clusters = pulltest.ArgoNS, 6, 3
	env, ctx := pulltest.StartOwnEnv(t, argoNS)
	c := env.Client
	for i := range apps {
		app := pulltest.NewApp(fmt.Sprintf("app-%d", i), fmt.Sprintf("cluster-%d", i%clusters))
		app.Object["spec"].(map[string]any)["project"] = "team"
		if err := c.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
	}
	cfg := pullmodelsetup.DefaultConfig()
	cfg.Policy.ArgoCDNamespace, cfg.Policy.SpokeNamespace = argoNS, argoNS
	informers := pulltest.StartPullCache(ctx, t, env, cfg)

	poll.Until(t, "the Applications of cluster-1 found through the index", 10*time.Second, func() error {
		list := pullmodel.NewApplicationList()
		if err := informers.List(ctx, list, client.MatchingFields{pullmodel.IndexAppByCluster: "cluster-1"}); err != nil {
			return err
		}
		if len(list.Items) != apps/clusters {
			return fmt.Errorf("%d Applications, want %d", len(list.Items), apps/clusters)
		}
		for _, app := range list.Items {
			if pullmodel.TargetCluster(&app) != "cluster-1" {
				return fmt.Errorf("%s targets %s", app.GetName(), pullmodel.TargetCluster(&app))
			}
		}
		return nil
	})
	informer, err := informers.GetInformer(ctx, pullmodel.NewApplication())
	if err != nil {
		t.Fatal(err)
	}
	indexer := informer.(toolscache.SharedIndexInformer).GetIndexer()
	for _, index := range []string{pullmodel.IndexAppByCluster, pullmodel.IndexAppByClusterProject} {
		if keys := indexer.ListIndexFuncValues("field:" + index); len(keys) != clusters {
			t.Errorf("index %s holds %d keys for %d values: %q", index, len(keys), clusters, keys)
		}
	}
}
