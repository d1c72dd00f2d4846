package pulltest

import (
	"context"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// ManagerTransport is an HTTP client for env and the REST mapper the manager reads through
// (manager.NewRESTMapper): a cache or client a test builds by hand uses both, as the binary's do.
func ManagerTransport(t testing.TB, env *testenv.Env) (*http.Client, meta.RESTMapper) {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := manager.NewRESTMapper(env.Config, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	return httpClient, mapper
}

// StartPullCache starts the pull model's cache as the manager makes it (its options, indexes and
// REST mapper) against env, and returns it synced: for tests that run one of its reconcilers by
// hand, without a manager. It stops with ctx.
func StartPullCache(ctx context.Context, t testing.TB, env *testenv.Env, cfg pullmodelsetup.Config) cache.Cache {
	t.Helper()
	httpClient, mapper := ManagerTransport(t, env)
	informers, err := cache.New(env.Config, pullmodelsetup.CacheOptions(cfg, env.Client.Scheme(), mapper, httpClient))
	if err != nil {
		t.Fatal(err)
	}
	if err := pullmodel.SetupIndexes(ctx, informers); err != nil {
		t.Fatal(err)
	}
	for o := range pullmodelsetup.CacheByObject(cfg) {
		if _, err := informers.GetInformer(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	return informers
}

// StartOwnEnv starts an API server with Argo CD's CRDs for one test, apart from its package's
// Suite (whose manager would reconcile the test's objects too), creates namespaces in it, and
// returns it with a context that ends with the test.
func StartOwnEnv(t *testing.T, namespaces ...string) (*testenv.Env, context.Context) {
	t.Helper()
	env := testenv.StartForTest(t, testenv.Options{WithArgoCD: true})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, ns := range namespaces {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	return env, ctx
}
