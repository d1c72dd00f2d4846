// Package ownership answers which managed clusters a GitOpsCluster selects, and which GitOpsCluster
// owns a cluster when several select it. The reconciler and the signer share these answers so
// that they never disagree about who may do what for a cluster.
package ownership

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// Field indexes registered on the manager's cache.
const (
	// IndexDecisionClusters indexes PlacementDecisions by every cluster name they decide.
	IndexDecisionClusters = "argocd-agent-addon.decisionClusters"
	// IndexGitOpsClusterPlacement indexes GitOpsClusters by "<namespace>/<placement name>".
	IndexGitOpsClusterPlacement = "argocd-agent-addon.placement"
)

// SetupIndexes registers the field indexes this package's lookups use.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &clusterv1beta1.PlacementDecision{}, IndexDecisionClusters, func(o client.Object) []string {
		pd := o.(*clusterv1beta1.PlacementDecision)
		out := make([]string, 0, len(pd.Status.Decisions))
		for _, d := range pd.Status.Decisions {
			out = append(out, d.ClusterName)
		}
		return out
	}); err != nil {
		return fmt.Errorf("indexing PlacementDecisions: %w", err)
	}
	if err := indexer.IndexField(ctx, &v1alpha1.GitOpsCluster{}, IndexGitOpsClusterPlacement, func(o client.Object) []string {
		g := o.(*v1alpha1.GitOpsCluster)
		return []string{PlacementKey(g.Namespace, g.Spec.PlacementRef.Name)}
	}); err != nil {
		return fmt.Errorf("indexing GitOpsClusters: %w", err)
	}
	return nil
}

// PlacementKey is the index value of a Placement.
func PlacementKey(namespace, name string) string { return namespace + "/" + name }

// PlacementLabel is the label OCM puts on every PlacementDecision of a Placement.
const PlacementLabel = clusterv1beta1.PlacementLabel

// SelectedClustersAndPages is SelectedClusters that also returns how many PlacementDecision
// objects (pages) the Placement has: none means it was never scheduled, not "selects nothing".
func SelectedClustersAndPages(ctx context.Context, r client.Reader, namespace, placement string) (sets.Set[string], int, error) {
	// Read only: from the cache, its own objects rather than copies of every page.
	var list clusterv1beta1.PlacementDecisionList
	if err := r.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{PlacementLabel: placement}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, 0, fmt.Errorf("listing PlacementDecisions of %s/%s: %w", namespace, placement, err)
	}
	out := sets.New[string]()
	for i := range list.Items {
		for _, d := range list.Items[i].Status.Decisions {
			if d.ClusterName != "" {
				out.Insert(d.ClusterName)
			}
		}
	}
	return out, len(list.Items), nil
}

// SelectedClusters returns the union of the decisions of every PlacementDecision of the
// Placement namespace/name. A read error is returned as is: callers must never take it for an
// empty selection.
func SelectedClusters(ctx context.Context, r client.Reader, namespace, placement string) (sets.Set[string], error) {
	out, _, err := SelectedClustersAndPages(ctx, r, namespace, placement)
	return out, err
}

// SelectsLive reports, from the API server, whether the Placement namespace/name selects
// cluster, reading only what decides it: the decision pages the cache (which must carry the
// field indexes of SetupIndexes) says name the cluster, each fetched live by name. Only when
// none of them still names it (the cluster left, or moved to another page mid-update) are all
// the Placement's pages read live.
func SelectsLive(ctx context.Context, cache, live client.Reader, namespace, placement, cluster string) (bool, error) {
	var cached clusterv1beta1.PlacementDecisionList
	if err := cache.List(ctx, &cached, client.InNamespace(namespace), client.MatchingFields{IndexDecisionClusters: cluster}, client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("listing PlacementDecisions of cluster %s: %w", cluster, err)
	}
	for i := range cached.Items {
		if cached.Items[i].Labels[PlacementLabel] != placement {
			continue
		}
		pd := &clusterv1beta1.PlacementDecision{}
		if err := live.Get(ctx, client.ObjectKeyFromObject(&cached.Items[i]), pd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, err
		}
		if pd.Labels[PlacementLabel] == placement && decides(pd, cluster) {
			return true, nil
		}
	}
	var list clusterv1beta1.PlacementDecisionList
	for {
		if err := live.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{PlacementLabel: placement},
			client.Limit(100), client.Continue(list.Continue)); err != nil {
			return false, fmt.Errorf("listing PlacementDecisions of %s/%s: %w", namespace, placement, err)
		}
		for i := range list.Items {
			if decides(&list.Items[i], cluster) {
				return true, nil
			}
		}
		if list.Continue == "" {
			return false, nil
		}
	}
}

func decides(pd *clusterv1beta1.PlacementDecision, cluster string) bool {
	for _, d := range pd.Status.Decisions {
		if d.ClusterName == cluster {
			return true
		}
	}
	return false
}

// PrincipalAllowed says why goc may not use its principal namespace, or "". A GitOpsCluster
// may always use its own namespace; another principal namespace must list the GitOpsCluster's
// namespace (or "*") in its annotation v1alpha1.AnnotationAllowedGitOpsClusterNamespaces. This
// keeps one tenant from adding names to, or issuing certificates from, another's principal.
func PrincipalAllowed(ctx context.Context, r client.Reader, goc *v1alpha1.GitOpsCluster) (string, error) {
	p := goc.Spec.ArgoCDAgentAddon.PrincipalNamespace
	if p == "" || p == goc.Namespace {
		return "", nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: p}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("namespace %s does not exist", p), nil
		}
		return "", err
	}
	for _, a := range strings.Split(ns.Annotations[v1alpha1.AnnotationAllowedGitOpsClusterNamespaces], ",") {
		if a = strings.TrimSpace(a); a == "*" || a == goc.Namespace {
			return "", nil
		}
	}
	return fmt.Sprintf("namespace %s does not list %s in its annotation %s", p, goc.Namespace, v1alpha1.AnnotationAllowedGitOpsClusterNamespaces), nil
}

// Less orders GitOpsClusters by precedence: the older one first, then by namespace/name. The
// first GitOpsCluster that selects a cluster owns it, so ownership never flaps.
func Less(a, b *v1alpha1.GitOpsCluster) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// SelectorsOf returns every live GitOpsCluster whose Placement currently selects cluster, in
// precedence order (the owner first). It reads through the field indexes, so it costs the
// number of decisions naming the cluster, not the fleet size.
func SelectorsOf(ctx context.Context, r client.Reader, cluster string) ([]*v1alpha1.GitOpsCluster, error) {
	// Only the labels are read: the cache's own objects, not copies of every decision page
	// (this runs for every ManagedCluster and ManagedClusterAddOn event of a fleet).
	var pds clusterv1beta1.PlacementDecisionList
	if err := r.List(ctx, &pds, client.MatchingFields{IndexDecisionClusters: cluster}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing PlacementDecisions for cluster %s: %w", cluster, err)
	}
	placements := sets.New[string]()
	for i := range pds.Items {
		if p := pds.Items[i].Labels[PlacementLabel]; p != "" {
			placements.Insert(PlacementKey(pds.Items[i].Namespace, p))
		}
	}
	var out []*v1alpha1.GitOpsCluster
	for _, key := range sets.List(placements) {
		var gocs v1alpha1.GitOpsClusterList
		if err := r.List(ctx, &gocs, client.MatchingFields{IndexGitOpsClusterPlacement: key}); err != nil {
			return nil, fmt.Errorf("listing GitOpsClusters for placement %s: %w", key, err)
		}
		for i := range gocs.Items {
			g := &gocs.Items[i]
			if g.DeletionTimestamp.IsZero() {
				out = append(out, g)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return Less(out[i], out[j]) })
	return out, nil
}

// PlacementOwner returns the oldest live GitOpsCluster referencing the Placement (nil if none):
// the one that configures the agents of the clusters it selects.
func PlacementOwner(ctx context.Context, r client.Reader, namespace, placement string) (*v1alpha1.GitOpsCluster, error) {
	var gocs v1alpha1.GitOpsClusterList
	if err := r.List(ctx, &gocs, client.MatchingFields{IndexGitOpsClusterPlacement: PlacementKey(namespace, placement)}); err != nil {
		return nil, err
	}
	var owner *v1alpha1.GitOpsCluster
	for i := range gocs.Items {
		g := &gocs.Items[i]
		if g.DeletionTimestamp.IsZero() && (owner == nil || Less(g, owner)) {
			owner = g
		}
	}
	return owner, nil
}

// GitOpsClustersForPlacement returns the GitOpsClusters that reference a Placement.
func GitOpsClustersForPlacement(ctx context.Context, r client.Reader, namespace, placement string) ([]types.NamespacedName, error) {
	var gocs v1alpha1.GitOpsClusterList
	if err := r.List(ctx, &gocs, client.MatchingFields{IndexGitOpsClusterPlacement: PlacementKey(namespace, placement)}); err != nil {
		return nil, err
	}
	out := make([]types.NamespacedName, 0, len(gocs.Items))
	for i := range gocs.Items {
		out = append(out, types.NamespacedName{Namespace: gocs.Items[i].Namespace, Name: gocs.Items[i].Name})
	}
	return out, nil
}

// Members are the live GitOpsClusters of one principal namespace that may use it
// (PrincipalAllowed). Only they decide anything of the principal: its PKI setting, the names its
// serving certificate carries, its application mapping. A GitOpsCluster that merely names
// another tenant's principal namespace decides nothing there. A pass reads them once
// (PrincipalMembers) and every decision of the principal takes them from there.
type Members []*v1alpha1.GitOpsCluster

// PrincipalMembers returns the Members of principal namespace ns.
func PrincipalMembers(ctx context.Context, reader client.Reader, ns string) (Members, error) {
	var list v1alpha1.GitOpsClusterList
	if err := reader.List(ctx, &list); err != nil {
		return nil, err
	}
	var out Members
	for i := range list.Items {
		o := &list.Items[i]
		if !o.DeletionTimestamp.IsZero() || names.PrincipalNamespace(o) != ns {
			continue
		}
		why, err := PrincipalAllowed(ctx, reader, o)
		if err != nil {
			return nil, err
		}
		if why == "" {
			out = append(out, o)
		}
	}
	return out, nil
}

// Elder returns the first, in Less order, of goc and the members that count: the one whose
// setting the principal's others must agree with. It is the same rule that decides which
// GitOpsCluster owns a cluster.
func (m Members) Elder(goc *v1alpha1.GitOpsCluster, counts func(*v1alpha1.GitOpsCluster) bool) *v1alpha1.GitOpsCluster {
	elder := goc
	for _, o := range m {
		if counts(o) && Less(o, elder) {
			elder = o
		}
	}
	return elder
}

// AddressesOfOthers returns the principal addresses the members other than goc hand to their
// agents: the address each names, else the one discovered for it.
func (m Members) AddressesOfOthers(goc *v1alpha1.GitOpsCluster) []string {
	var out []string
	for _, o := range m {
		if o.Namespace == goc.Namespace && o.Name == goc.Name {
			continue
		}
		if o.Spec.ArgoCDAgentAddon.PrincipalServerAddress != "" {
			out = append(out, o.Spec.ArgoCDAgentAddon.PrincipalServerAddress)
		} else if o.Status.Principal != nil {
			out = append(out, o.Status.Principal.Address)
		}
	}
	return out
}

// Live reports whether the GitOpsCluster key exists and is not being deleted (false for an
// empty name).
func Live(ctx context.Context, reader client.Reader, key types.NamespacedName) (bool, error) {
	if key.Name == "" {
		return false, nil
	}
	g := &v1alpha1.GitOpsCluster{}
	if err := reader.Get(ctx, key, g); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return g.DeletionTimestamp.IsZero(), nil
}
