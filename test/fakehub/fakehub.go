// Package fakehub fills a real API server with a hub's worth of OCM objects that no OCM
// controller writes: ManagedClusters with their namespaces, this addon's ManagedClusterAddOn
// reporting Available (standing in for OCM's addon-manager and the spoke), what else a real hub
// keeps per cluster, and a Placement's PlacementDecisions in OCM's pages of 100.
package fakehub

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DecisionsPerPage is OCM's page size for a Placement's decisions.
const DecisionsPerPage = 100

// OtherAddons are the ManagedClusterAddOns a typical hub carries for other addons.
var OtherAddons = []string{"application-manager", "cert-policy-controller", "cluster-proxy", "config-policy-controller",
	"governance-policy-framework", "managed-serviceaccount", "search-collector", "work-manager"}

// Options shape the clusters CreateClusters makes.
type Options struct {
	// Addon is this project's addon name; its ManagedClusterAddOn reports Available.
	Addon string
	// Realistic adds OtherAddons' ManagedClusterAddOns and two unrelated Secrets and ConfigMaps
	// to every cluster namespace.
	Realistic bool
}

// Names returns n cluster names with a prefix, sorted as OCM sorts them.
func Names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

// CreateClusters creates the clusters with 16 writers.
func CreateClusters(ctx context.Context, c client.Client, names []string, opts Options) error {
	return Parallel(names, func(name string) error { return createCluster(ctx, c, name, opts) })
}

func createCluster(ctx context.Context, c client.Client, name string, opts Options) error {
	if err := c.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}); err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		return err
	}
	if opts.Realistic {
		for _, other := range OtherAddons {
			if err := c.Create(ctx, &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: other}}); err != nil {
				return err
			}
		}
		for i := range 2 {
			if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: fmt.Sprintf("unrelated-%d", i)},
				Data: map[string][]byte{"data": make([]byte, 2048)}}); err != nil {
				return err
			}
			if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: fmt.Sprintf("unrelated-%d", i)},
				Data: map[string]string{"data": strings.Repeat("x", 1024)}}); err != nil {
				return err
			}
		}
	}
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: opts.Addon}}
	if err := c.Create(ctx, mca); err != nil {
		return err
	}
	meta.SetStatusCondition(&mca.Status.Conditions, metav1.Condition{Type: addonv1alpha1.ManagedClusterAddOnConditionAvailable,
		Status: metav1.ConditionTrue, Reason: "FakeHub", Message: "stands in for OCM's addon-manager"})
	return c.Status().Update(ctx, mca)
}

// SetDecisions writes the Placement's decisions as OCM does: sorted pages of 100, named
// <placement>-decision-<i>. Like OCM's placement controller, which compares with its lister's
// copy, it writes only the pages whose decisions change, and deletes pages no longer needed.
func SetDecisions(ctx context.Context, c client.Client, namespace, placement string, clusters []string) error {
	var list clusterv1beta1.PlacementDecisionList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{clusterv1beta1.PlacementLabel: placement}); err != nil {
		return err
	}
	existing := map[string]*clusterv1beta1.PlacementDecision{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	pages := (len(clusters) + DecisionsPerPage - 1) / DecisionsPerPage
	for page := 0; page < pages; page++ {
		end := min((page+1)*DecisionsPerPage, len(clusters))
		if err := writePage(ctx, c, namespace, placement, page, clusters[page*DecisionsPerPage:end], existing); err != nil {
			return err
		}
	}
	for i := range list.Items {
		var idx int
		if _, err := fmt.Sscanf(strings.TrimPrefix(list.Items[i].Name, placement+"-decision-"), "%d", &idx); err == nil && idx >= pages && pages > 0 {
			if err := c.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

func writePage(ctx context.Context, c client.Client, namespace, placement string, page int, clusters []string, existing map[string]*clusterv1beta1.PlacementDecision) error {
	pd, found := existing[fmt.Sprintf("%s-decision-%d", placement, page)]
	if found && equality.Semantic.DeepEqual(pd.Status.Decisions, decisionsOf(clusters)) {
		return nil
	}
	return SetDecisionPage(ctx, c, namespace, placement, page, clusters)
}

func decisionsOf(clusters []string) []clusterv1beta1.ClusterDecision {
	decisions := make([]clusterv1beta1.ClusterDecision, 0, len(clusters))
	for _, cluster := range clusters {
		decisions = append(decisions, clusterv1beta1.ClusterDecision{ClusterName: cluster, Reason: "fakehub"})
	}
	return decisions
}

// SetDecisionPage makes page page of the Placement's decisions (<placement>-decision-<page>,
// created if missing) list exactly clusters, in that order, whatever the other pages say: a
// test writes a selection mid-update this way, as OCM does one page at a time.
func SetDecisionPage(ctx context.Context, c client.Client, namespace, placement string, page int, clusters []string) error {
	name := fmt.Sprintf("%s-decision-%d", placement, page)
	pd := &clusterv1beta1.PlacementDecision{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pd); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		pd = &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{clusterv1beta1.PlacementLabel: placement, clusterv1beta1.DecisionGroupIndexLabel: "0"}}}
		if err := c.Create(ctx, pd); err != nil {
			return err
		}
	}
	pd.Status.Decisions = decisionsOf(clusters)
	return c.Status().Update(ctx, pd)
}

// SetPlacementCount writes a Placement's status as OCM's scheduler does once its decision pages
// are written: Satisfied, with the number of clusters it selected. The manager reads pages whose
// total differs from that number as being rewritten, and removes nothing meanwhile.
func SetPlacementCount(ctx context.Context, c client.Client, namespace, placement string, selected int) error {
	pl := &clusterv1beta1.Placement{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: placement}, pl); err != nil {
		return err
	}
	pl.Status.NumberOfSelectedClusters = int32(selected)
	meta.SetStatusCondition(&pl.Status.Conditions, metav1.Condition{Type: clusterv1beta1.PlacementConditionSatisfied,
		Status: metav1.ConditionTrue, Reason: "AllDecisionsScheduled", Message: "set by the test's hub"})
	return c.Status().Update(ctx, pl)
}

// Parallel runs fn over items with 16 workers and returns the first error.
func Parallel[T any](items []T, fn func(T) error) error {
	return ParallelN(16, items, fn)
}

// ParallelN is Parallel with n workers.
func ParallelN[T any](n int, items []T, fn func(T) error) error {
	work := make(chan T)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range max(1, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				if err := fn(it); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	return first
}
