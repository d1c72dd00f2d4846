package addonobjects_test

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/addonobjects"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestProbesInFlightAreNotCreatedAgain: a pass that runs before the cache shows the probes the
// pass before it created finds them missing; it must not create them again, and must ask for
// another pass. Once the cache shows them, a probe deleted later is created again at once. A
// probe that existed already is not waited for, and one in flight when its GitOpsCluster goes
// is deleted although the cache does not list it.
func TestProbesInFlightAreNotCreatedAgain(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{})
	ctx := context.Background()
	clusters := []string{"inflight-1", "inflight-2", "inflight-3"}
	for _, c := range append(clusters, "inflight-old") {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c}}); err != nil {
			t.Fatal(err)
		}
	}
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var creates atomic.Int32
	// cacheBehind makes a list of ManifestWorks come back empty, as from a cache that has not
	// seen them yet.
	var cacheBehind atomic.Bool
	counting := interceptor.NewClient(direct, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*workv1.ManifestWork); ok {
				creates.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*workv1.ManifestWorkList); ok && cacheBehind.Load() {
				return nil
			}
			return c.List(ctx, list, opts...)
		},
	})
	w := &addonobjects.Prober{
		Hub:            config.Hub{Client: counting, Reader: direct, Config: config.Config{DefaultAgentNamespace: "argocd", WriteConcurrency: 2, ProbesPerPass: 10}},
		ProbesInFlight: &addonobjects.ProbesInFlight{},
	}
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "inflight"}}
	sync := func(step string, missing []string, wantCreates int32, wantMore bool) {
		t.Helper()
		more, err := w.SyncProbes(ctx, goc, addonobjects.ReportMissing(missing...))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got := creates.Load(); got != wantCreates || more != wantMore {
			t.Fatalf("%s: %d probe creates in all and more=%v, want %d and %v", step, got, more, wantCreates, wantMore)
		}
	}
	sync("first pass", clusters, 3, false)
	sync("a pass before the cache shows them", clusters, 3, true)
	sync("the cache shows them", nil, 3, false)
	if err := env.Client.Delete(ctx, &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: clusters[0], Name: names.ProbeWorkName(goc)}}); err != nil {
		t.Fatal(err)
	}
	sync("a probe deleted later", clusters[:1], 4, false)

	cacheBehind.Store(true)
	if err := w.DeleteProbes(ctx, goc); err != nil {
		t.Fatal(err)
	}
	for c, wantGone := range map[string]bool{clusters[0]: true, clusters[1]: false} {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: c, Name: names.ProbeWorkName(goc)}, &workv1.ManifestWork{})
		if gone := apierrors.IsNotFound(err); gone != wantGone || (err != nil && !gone) {
			t.Errorf("GitOpsCluster deleted, the cache behind: the probe of %s gone=%v (%v), want %v", c, gone, err, wantGone)
		}
	}
	cacheBehind.Store(false)

	old := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "inflight-old", Name: names.ProbeWorkName(goc)}}
	if err := env.Client.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	sync("a probe that exists already", []string{"inflight-old"}, 5, false)
	sync("the same, the cache still not showing it", []string{"inflight-old"}, 6, false)
}
