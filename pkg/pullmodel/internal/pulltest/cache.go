package pulltest

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// StartPullCache starts the pull model's cache as the manager makes it (its scope, transforms
// and indexes) against env, and returns it synced: for tests that run one of its reconcilers by
// hand, without a manager. It stops with ctx.
func StartPullCache(ctx context.Context, t testing.TB, env *testenv.Env, cfg pullmodelsetup.Config) cache.Cache {
	t.Helper()
	informers, err := cache.New(env.Config, cache.Options{Scheme: env.Client.Scheme(), ByObject: pullmodelsetup.CacheByObject(cfg), ReaderFailOnMissingInformer: true})
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
