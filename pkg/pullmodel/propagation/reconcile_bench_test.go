package propagation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/tools/events"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
)

// benchReconciles numbers BenchmarkReconcileWithNothingToWrite's runs (-count), each with an
// Application of its own.
var benchReconciles int

// BenchmarkReconcileWithNothingToWrite: one reconcile of a delivered Application whose
// ManifestWork is what it asks for, as every event of it that changes nothing (its own status
// write, a feedback, a wake-up) costs. Its reads come from caches built as the manager's (the
// pull model's, and the manager's own cache of ManagedClusters behind the client, both with the
// manager's REST mapper); each operation must write nothing, which the benchmark checks from the objects'
// resource versions.
func BenchmarkReconcileWithNothingToWrite(b *testing.B) {
	if s == nil {
		b.Skip("needs a kube-apiserver; skipped with -short")
	}
	benchReconciles++
	app, work := s.Deliver(b, fmt.Sprintf("bench-nothing-%d", benchReconciles), "bench-nothing1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := pullmodelsetup.DefaultConfig()
	cfg.Policy.SourceNamespaces = []string{pulltest.ArgoNS}
	informers := pulltest.StartPullCache(ctx, b, s.Env, cfg)
	httpClient, mapper := pulltest.ManagerTransport(b, s.Env)
	hubOptions := manager.CacheOptions(manager.DefaultOptions())
	hubOptions.Scheme, hubOptions.Mapper, hubOptions.HTTPClient = s.Client.Scheme(), mapper, httpClient
	hub, err := cache.New(s.Config, hubOptions)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := hub.GetInformer(ctx, &clusterv1.ManagedCluster{}); err != nil {
		b.Fatal(err)
	}
	go func() { _ = hub.Start(ctx) }()
	if !hub.WaitForCacheSync(ctx) {
		b.Fatal("the ManagedCluster cache did not sync")
	}
	cl, err := client.New(s.Config, client.Options{Scheme: s.Client.Scheme(), Mapper: mapper, HTTPClient: httpClient, Cache: &client.CacheOptions{Reader: hub}})
	if err != nil {
		b.Fatal(err)
	}
	r := &propagation.Reconciler{Client: cl, APIReader: s.Client, Cache: informers, Policy: cfg.Policy, Sealer: s.Sealer(b), Now: time.Now, Recorder: events.NewFakeRecorder(100)}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(app)}
	// The manager's own reconciles of the delivery settle first (its condition).
	waitQuiet(b)
	before := versions(ctx, b, app, work)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if after := versions(ctx, b, app, work); after != before {
		b.Fatalf("a reconcile with nothing to write wrote: resource versions %v, then %v", before, after)
	}
}

// versions reads the Application's and the ManifestWork's resource versions from the API server.
func versions(ctx context.Context, b *testing.B, app, work client.Object) [2]string {
	b.Helper()
	a, w := pullmodel.NewApplication(), &workv1.ManifestWork{}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(app), a); err != nil {
		b.Fatal(err)
	}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(work), w); err != nil {
		b.Fatal(err)
	}
	return [2]string{a.GetResourceVersion(), w.GetResourceVersion()}
}
