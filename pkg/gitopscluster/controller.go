// Package gitopscluster is the GitOpsCluster reconciler: from an OCM Placement to a configured
// argocd-agent fleet (ClusterManagementAddOn entry, AddOnTemplate, AddOnDeploymentConfig, hub
// PKI, principal endpoint, agent registration secrets and status).
package gitopscluster

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/finalizers"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownwrites"
)

// Reconciler turns one GitOpsCluster into its fleet objects and status.
type Reconciler struct {
	Client client.Client
	// APIReader reads around the cache where a stale read would do harm; nil uses Client.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Config    config.Config

	// ComponentsAddOns caches the components addon's ManagedClusterAddOns; SetupWithManager
	// makes it when nil.
	ComponentsAddOns cache.Cache

	departures   departures
	exclusive    exclusiveCache
	statusWrites ownwrites.Tracker
}

// observation is what a reconcile learned about the world before writing anything.
type observation struct {
	placementFound bool
	// selected is nil when the selection is unknown (Placement missing): nothing is torn down then.
	selected sets.Set[string]
	// owned are the selected clusters this GitOpsCluster owns (not owned by an older one).
	owned sets.Set[string]
	// teardownBlocked says why the selection cannot be trusted to remove anything ("" when it
	// can): the Placement is missing or being deleted, has no decisions, or they are mid-update.
	teardownBlocked string
	// invalid maps selected clusters whose names cannot be agent names to the reason.
	invalid  map[string]string
	conflict []string
}

// trustedOwned is owned when the selection can be trusted to remove things, else nil.
func (o *observation) trustedOwned() sets.Set[string] {
	if o.selected == nil || o.teardownBlocked != "" {
		return nil
	}
	return o.owned
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	goc := &v1alpha1.GitOpsCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, goc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A pass woken by this manager's own status write works from the written status.
	if err := r.statusWrites.Fresh(ctx, r.Client, goc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !goc.DeletionTimestamp.IsZero() {
		r.statusWrites.Forget(goc.UID)
		return ctrl.Result{}, r.finalize(ctx, goc)
	}
	if !controllerutil.ContainsFinalizer(goc, v1alpha1.Finalizer) {
		if err := finalizers.Add(ctx, r.Client, goc, v1alpha1.Finalizer); err != nil {
			return ctrl.Result{}, err
		}
	}

	return r.reconcileNormal(ctx, goc)
}

func (r *Reconciler) observePlacement(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string) (*observation, error) {
	obs := &observation{owned: sets.New[string](), invalid: map[string]string{}}
	pl := &clusterv1beta1.Placement{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: goc.Spec.PlacementRef.Name}, pl); err != nil {
		if apierrors.IsNotFound(err) {
			return obs, nil
		}
		return nil, fmt.Errorf("reading Placement %s/%s: %w", goc.Namespace, goc.Spec.PlacementRef.Name, err)
	}
	obs.placementFound = true
	selected, pages, err := fleet.SelectedClustersAndPages(ctx, r.Client, goc.Namespace, goc.Spec.PlacementRef.Name)
	if err != nil {
		return nil, err
	}
	obs.selected = selected
	obs.teardownBlocked = fleet.SelectionUnknown(pl, selected, pages)
	// Ownership in one pass: every other live GitOpsCluster's selection is read once (from the
	// cache), not looked up again for each selected cluster.
	others, err := r.otherSelections(ctx, goc)
	if err != nil {
		return nil, err
	}
	for _, c := range sets.List(selected) {
		if why := names.ValidAgentName(c, principalNS); why != "" {
			obs.invalid[c] = why
			continue
		}
		var otherNames []string
		ownedByUs := true
		for _, o := range others {
			if !o.selected.Has(c) {
				continue
			}
			// Sharing the Placement is reported as PlacementInUse, not per cluster.
			if o.goc.Namespace != goc.Namespace || o.goc.Spec.PlacementRef.Name != goc.Spec.PlacementRef.Name {
				otherNames = append(otherNames, o.goc.Namespace+"/"+o.goc.Name)
			}
			if fleet.Less(o.goc, goc) {
				ownedByUs = false
			}
		}
		if len(otherNames) > 0 {
			obs.conflict = append(obs.conflict, fmt.Sprintf("%s (also selected by GitOpsCluster %s)", c, strings.Join(otherNames, ", ")))
		}
		if ownedByUs {
			obs.owned.Insert(c)
		}
	}
	return obs, nil
}

type selection struct {
	goc      *v1alpha1.GitOpsCluster
	selected sets.Set[string]
}

// otherSelections returns every other live GitOpsCluster with the clusters its Placement
// selects, in precedence order.
func (r *Reconciler) otherSelections(ctx context.Context, goc *v1alpha1.GitOpsCluster) ([]selection, error) {
	var list v1alpha1.GitOpsClusterList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	byPlacement := map[string]sets.Set[string]{}
	var out []selection
	for i := range list.Items {
		o := &list.Items[i]
		if (o.Namespace == goc.Namespace && o.Name == goc.Name) || !o.DeletionTimestamp.IsZero() {
			continue
		}
		key := fleet.PlacementKey(o.Namespace, o.Spec.PlacementRef.Name)
		sel, ok := byPlacement[key]
		if !ok {
			var err error
			if sel, err = fleet.SelectedClusters(ctx, r.Client, o.Namespace, o.Spec.PlacementRef.Name); err != nil {
				return nil, err
			}
			byPlacement[key] = sel
		}
		out = append(out, selection{goc: o, selected: sel})
	}
	sort.Slice(out, func(i, j int) bool { return fleet.Less(out[i].goc, out[j].goc) })
	return out, nil
}

// principalHostsOfOthers returns the principal addresses other GitOpsClusters sharing this
// principal namespace hand to their agents, so the one serving certificate covers them all and
// two GitOpsClusters never re-issue it back and forth.
func (r *Reconciler) principalHostsOfOthers(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string) ([]string, error) {
	var list v1alpha1.GitOpsClusterList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []string
	for i := range list.Items {
		o := &list.Items[i]
		if (o.Namespace == goc.Namespace && o.Name == goc.Name) || !o.DeletionTimestamp.IsZero() || names.PrincipalNamespace(o) != principalNS {
			continue
		}
		if o.Spec.ArgoCDAgentAddon.PrincipalServerAddress != "" {
			out = append(out, o.Spec.ArgoCDAgentAddon.PrincipalServerAddress)
		} else if o.Status.Principal != nil {
			out = append(out, o.Status.Principal.Address)
		}
	}
	return out, nil
}

func (r *Reconciler) writeStatus(ctx context.Context, goc *v1alpha1.GitOpsCluster, status *v1alpha1.GitOpsClusterStatus) error {
	if equality.Semantic.DeepEqual(goc.Status, *status) {
		return nil
	}
	updated := goc.DeepCopy()
	updated.Status = *status
	// A merge patch carries only what differs from the copy read, so a field emptied since is
	// not cleared when that copy is older than the server's (a cache that has not seen the
	// last write): the patch is conditional on the version read, and a stale read retries.
	if err := r.Client.Status().Patch(ctx, updated, client.MergeFromWithOptions(goc, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	r.statusWrites.Wrote(goc.UID, goc.ResourceVersion, updated.ResourceVersion)
	return nil
}

func (r *Reconciler) event(goc *v1alpha1.GitOpsCluster, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(goc, nil, eventType, reason, action, note, args...)
	}
}

// summarize keeps messages bounded on fleets of thousands of clusters.
func summarize(items []string) string {
	sort.Strings(items)
	if len(items) <= maxListedClusters {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxListedClusters], ", "), len(items)-maxListedClusters)
}

// namespaceManaged reports whether the manager may keep secrets in ns.
func (r *Reconciler) namespaceManaged(ns string) bool {
	if len(r.Config.ManagedNamespaces) == 0 {
		return true
	}
	for _, m := range r.Config.ManagedNamespaces {
		if m == ns {
			return true
		}
	}
	return false
}
