package propagation_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// counter sums the series of a counter of the controller-runtime registry whose labels include
// labels.
func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.Metric {
			have := map[string]string{}
			for _, l := range m.Label {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// appWorkWriteCounter counts, from a watch, the creations of Applications' ManifestWorks and
// the updates that change their spec, labels or annotations (not the work agent's status).
type appWorkWriteCounter struct {
	mu     sync.Mutex
	seen   map[types.NamespacedName]*workv1.ManifestWork
	writes int
}

func watchAppWorkWrites(t *testing.T) *appWorkWriteCounter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	wc, err := client.NewWithWatch(s.Config, client.Options{Scheme: s.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	list := &workv1.ManifestWorkList{}
	if err := wc.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	c := &appWorkWriteCounter{seen: map[types.NamespacedName]*workv1.ManifestWork{}}
	for i := range list.Items {
		c.seen[client.ObjectKeyFromObject(&list.Items[i])] = &list.Items[i]
	}
	w, err := wc.Watch(ctx, &workv1.ManifestWorkList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			mw, ok := ev.Object.(*workv1.ManifestWork)
			if !ok || mw.Annotations[pullmodel.AnnotationHubAppName] == "" {
				continue
			}
			key := client.ObjectKeyFromObject(mw)
			c.mu.Lock()
			old := c.seen[key]
			switch ev.Type {
			case watch.Added:
				c.writes++
			case watch.Modified:
				if old == nil || !equality.Semantic.DeepEqual(old.Spec, mw.Spec) || !equality.Semantic.DeepEqual(old.Labels, mw.Labels) ||
					!equality.Semantic.DeepEqual(old.Annotations, mw.Annotations) {
					c.writes++
				}
			}
			c.seen[key] = mw
			if ev.Type == watch.Deleted {
				delete(c.seen, key)
			}
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *appWorkWriteCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// TestDeliveriesCountWritesNotPasses: argocd_agent_addon_pull_model_deliveries_total counts a
// delivery each time an Application's ManifestWork is created or updated, and a refusal each
// time one is recorded on an Application; the passes in between that find everything as it
// should be (here woken by the namespace's ManagedClusterSetBinding) count nothing.
func TestDeliveriesCountWritesNotPasses(t *testing.T) {
	const cluster = "deliveries-metric1"
	s.CreateCluster(t, cluster, true)
	waitQuiet(t)
	writes := watchAppWorkWrites(t)
	delivered := map[string]string{"result": propagation.ResultDelivered}
	missingCluster := map[string]string{"result": propagation.ResultRefused, "reason": propagation.ReasonMissingCluster}
	passesOf := map[string]string{"controller": "pullmodel-propagation"}
	d0, r0, p0 := counter(t, propagation.MetricDeliveries, delivered), counter(t, propagation.MetricDeliveries, missingCluster), counter(t, "controller_runtime_reconcile_total", passesOf)

	s.Create(t, pulltest.NewApp("deliveries-a", cluster))
	app := s.GetApp(t, "deliveries-a")
	waitDelivered(t, app.GetName(), cluster)
	noCluster := pulltest.NewApp("deliveries-nocluster", cluster)
	noCluster.SetAnnotations(map[string]string{pullmodel.AnnotationSkipReconcile: "true"})
	s.Create(t, noCluster)
	waitRefusedIn(t, pulltest.ArgoNS, noCluster.GetName(), propagation.ReasonMissingCluster)

	// Passes over both Applications that change nothing.
	for i := range 3 {
		before := counter(t, "controller_runtime_reconcile_total", passesOf)
		binding := &clusterv1beta2.ManagedClusterSetBinding{}
		if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: pulltest.ArgoNS, Name: pulltest.ClusterSet}, binding); err != nil {
			t.Fatal(err)
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{"test.example.com/touched":"%d"}}}`, i)
		if err := s.Client.Patch(context.Background(), binding, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
		poll.UntilState(t, "passes over the namespace's Applications", 30*time.Second, func(context.Context) (bool, string) {
			n := counter(t, "controller_runtime_reconcile_total", passesOf) - before
			return n >= 2, fmt.Sprint(n, " passes")
		})
	}

	// A change the cluster must get: the ManifestWork is updated.
	if err := s.Client.Patch(context.Background(), app, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"source":{"targetRevision":"v2"}}}`))); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "the new revision in the ManifestWork", 30*time.Second, func(context.Context) (bool, string) {
		rev, _, _ := unstructured.NestedString(payload(t, s.WaitWork(t, app, cluster)).Object, "spec", "source", "targetRevision")
		return rev == "v2", rev
	})
	waitQuiet(t)

	var d, r, p float64
	poll.UntilState(t, "every ManifestWork write counted once", 30*time.Second, func(context.Context) (bool, string) {
		d = counter(t, propagation.MetricDeliveries, delivered) - d0
		return int(d) == writes.count(), fmt.Sprintf("deliveries +%v, Applications' ManifestWork writes %d", d, writes.count())
	})
	r = counter(t, propagation.MetricDeliveries, missingCluster) - r0
	p = counter(t, "controller_runtime_reconcile_total", passesOf) - p0
	if writes.count() < 2 {
		t.Errorf("%d writes of Applications' ManifestWorks seen, want at least the creation and the update", writes.count())
	}
	if r != 1 {
		t.Errorf("refusals (MissingCluster) +%v, want +1: the refusal was recorded once", r)
	}
	if p < d+r+6 {
		t.Errorf("only %v passes for %v deliveries and %v refusals: the test made no pass that changes nothing", p, d, r)
	}
}
