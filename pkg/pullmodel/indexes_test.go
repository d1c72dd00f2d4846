package pullmodel_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// TestBucketedIndexesFindExactlyTheirWorks: the indexes whose values name one ManifestWork each
// hold a bucket per value, not a set per ManifestWork; their readers find, among a bucket's
// ManifestWorks, exactly those of the Application asked for, across clusters.
func TestBucketedIndexesFindExactlyTheirWorks(t *testing.T) {
	const buckets, apps = 3, 12
	pullmodel.SetIndexBuckets(t, buckets)
	env, ctx := pulltest.StartOwnEnv(t, pulltest.ArgoNS, "cluster-0", "cluster-1")
	c := env.Client
	want := map[string][]types.NamespacedName{}
	names := make([]string, 0, apps+1)
	for i := range apps {
		names = append(names, fmt.Sprintf("app-%02d", i))
	}
	// One more whose place on the two clusters falls in one bucket, so that the cluster is
	// what tells them apart.
	for i := apps; ; i++ {
		name := fmt.Sprintf("app-%02d", i)
		at := types.NamespacedName{Namespace: pulltest.ArgoNS, Name: name}
		if pullmodel.BucketOf(pullmodel.SpokeKey("cluster-0", at)) == pullmodel.BucketOf(pullmodel.SpokeKey("cluster-1", at)) {
			names = append(names, name)
			break
		}
	}
	for i, name := range names {
		app := pulltest.NewApp(name, "cluster-0")
		app.SetUID(types.UID(fmt.Sprintf("0b7d9c1e-3f6a-4e2b-9a1c-5d8e7f6a4b%02d", i)))
		// Moving between clusters: a ManifestWork on each until the old one goes.
		clusters := []string{"cluster-0", "cluster-1"}
		for _, cluster := range clusters {
			w, err := propagation.Build(propagation.Input{App: app})
			if err != nil {
				t.Fatal(err)
			}
			w.Namespace = cluster
			if err := c.Create(ctx, w); err != nil {
				t.Fatal(err)
			}
			key := pullmodel.AppKey(app.GetNamespace(), app.GetName())
			want[key] = append(want[key], types.NamespacedName{Namespace: cluster, Name: w.Name})
		}
	}
	cfg := pullmodelsetup.DefaultConfig()
	cfg.Policy.ArgoCDNamespace, cfg.Policy.SpokeNamespace = pulltest.ArgoNS, pulltest.ArgoNS
	informers := pulltest.StartPullCache(ctx, t, env, cfg)
	listed := func(list *workv1.ManifestWorkList) []types.NamespacedName {
		var out []types.NamespacedName
		for _, w := range list.Items {
			out = append(out, types.NamespacedName{Namespace: w.Namespace, Name: w.Name})
		}
		slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		return out
	}
	poll.Until(t, "every Application's ManifestWorks found through the index", 10*time.Second, func() error {
		for key, works := range want {
			list := &workv1.ManifestWorkList{}
			if err := pullmodel.ListWorksOfApp(ctx, informers, list, key); err != nil {
				return err
			}
			if got := listed(list); !slices.Equal(got, works) {
				return fmt.Errorf("the ManifestWorks of %s are %v, want %v", key, got, works)
			}
		}
		return nil
	})
	sameBucket := 0
	for key, works := range want {
		for _, name := range works {
			w := &workv1.ManifestWork{}
			if err := informers.Get(ctx, name, w); err != nil {
				t.Fatal(err)
			}
			at := pullmodel.SpokeApplicationOf(w)
			list := &workv1.ManifestWorkList{}
			if err := pullmodel.ListWorksDelivering(ctx, informers, list, name.Namespace, at); err != nil {
				t.Fatal(err)
			}
			if pullmodel.BucketOf(pullmodel.SpokeKey("cluster-0", at)) == pullmodel.BucketOf(pullmodel.SpokeKey("cluster-1", at)) {
				sameBucket++
			}
			if got := listed(list); !slices.Equal(got, []types.NamespacedName{name}) {
				t.Errorf("the ManifestWorks delivering %s of %s on %s are %v, want only %s", at, key, name.Namespace, got, name)
			}
		}
	}
	if sameBucket == 0 {
		t.Error("no Application is delivered in one bucket on both clusters: the cluster is not checked")
	}
	informer, err := informers.GetInformer(ctx, &workv1.ManifestWork{})
	if err != nil {
		t.Fatal(err)
	}
	indexer := informer.(toolscache.SharedIndexInformer).GetIndexer()
	for _, index := range []string{"pullmodel.work.app", "pullmodel.work.spoke"} {
		if keys := indexer.ListIndexFuncValues("field:" + index); len(keys) > buckets {
			t.Errorf("index %s holds %d keys for %d ManifestWorks, want at most %d buckets: %q", index, len(keys), 2*len(names), buckets, keys)
		}
	}
}

// TestMadeFromAppComparesTheKeysHalves: ListWorksOfApp's filter keeps exactly the ManifestWorks
// whose annotations name the Application, and builds nothing per ManifestWork it looks at.
func TestMadeFromAppComparesTheKeysHalves(t *testing.T) {
	work := func(ns, name string) *workv1.ManifestWork {
		w := &workv1.ManifestWork{}
		w.Annotations = map[string]string{}
		if ns != "" {
			w.Annotations[pullmodel.AnnotationHubAppNamespace] = ns
		}
		if name != "" {
			w.Annotations[pullmodel.AnnotationHubAppName] = name
		}
		return w
	}
	for _, tc := range []struct {
		key, ns, name string
		want          bool
	}{
		{"argocd/guestbook", "argocd", "guestbook", true},
		{"argocd/guestbook", "argocd", "guestbook-2", false},
		{"argocd/guestbook", "other", "guestbook", false},
		{"argocd/guestbook", "argocd", "", false},
		{"argocd/", "argocd", "", false},
		{"/guestbook", "", "guestbook", false},
		{"argocdguestbook", "argocd", "guestbook", false},
		{"", "", "", false},
	} {
		if got := pullmodel.MadeFromApp(tc.key)(work(tc.ns, tc.name)); got != tc.want {
			t.Errorf("key %q, annotations %q/%q: kept %v, want %v", tc.key, tc.ns, tc.name, got, tc.want)
		}
	}
	bucket := make([]*workv1.ManifestWork, 10)
	for i := range bucket {
		bucket[i] = work("argocd", fmt.Sprintf("app-%d", i))
	}
	keep := pullmodel.MadeFromApp("argocd/app-3")
	allocs := testing.AllocsPerRun(100, func() {
		for _, w := range bucket {
			keep(w)
		}
	})
	if allocs != 0 {
		t.Errorf("filtering a bucket of %d ManifestWorks allocated %.0f times, want 0", len(bucket), allocs)
	}
}
