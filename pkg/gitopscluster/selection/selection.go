// Package selection reads which managed clusters a GitOpsCluster selects and owns, and whether
// that selection is known well enough to remove anything.
package selection

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Observation is what a reconcile learned about the world before writing anything.
type Observation struct {
	PlacementFound bool
	// Selected is nil when the selection is unknown (Placement missing): nothing is torn down then.
	Selected sets.Set[string]
	// Owned are the selected clusters this GitOpsCluster owns (not owned by an older one).
	Owned sets.Set[string]
	// TeardownBlocked says why the selection cannot be trusted to remove anything ("" when it
	// can): the Placement is missing or being deleted, has no decisions, or they are mid-update.
	TeardownBlocked string
	// Unseen: no decision can be read at all (the Placement is missing, being deleted, or has
	// no PlacementDecision yet), so nothing shows which clusters are still selected. A cluster
	// seen missing before then may be back on a page not yet rewritten: its departure starts
	// over once decisions can be read again.
	Unseen bool
	// Invalid maps selected clusters whose names cannot be agent names to the reason.
	Invalid  map[string]string
	Conflict []string
}

// TrustedOwned is owned when the selection can be trusted to remove things, else nil.
func (o *Observation) TrustedOwned() sets.Set[string] {
	if o.Selected == nil || o.TeardownBlocked != "" {
		return nil
	}
	return o.Owned
}

// Observe reads what goc's Placement selects, which of those clusters goc owns (no older
// GitOpsCluster selects them), which names cannot be agent names in principalNS, and whether the
// selection may be trusted to remove anything.
func Observe(ctx context.Context, reader client.Reader, goc *v1alpha1.GitOpsCluster, principalNS string) (*Observation, error) {
	obs := &Observation{Owned: sets.New[string](), Invalid: map[string]string{}}
	pl := &clusterv1beta1.Placement{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: goc.Spec.PlacementRef.Name}, pl); err != nil {
		if apierrors.IsNotFound(err) {
			obs.Unseen = true
			return obs, nil
		}
		return nil, fmt.Errorf("reading Placement %s/%s: %w", goc.Namespace, goc.Spec.PlacementRef.Name, err)
	}
	obs.PlacementFound = true
	selected, pages, err := ownership.SelectedClustersAndPages(ctx, reader, goc.Namespace, goc.Spec.PlacementRef.Name)
	if err != nil {
		return nil, err
	}
	obs.Selected = selected
	obs.TeardownBlocked = ownership.SelectionUnknown(pl, selected, pages)
	obs.Unseen = pages == 0 || !pl.DeletionTimestamp.IsZero()
	// Ownership in one pass: every other live GitOpsCluster's selection is read once (from the
	// cache), not looked up again for each selected cluster.
	others, err := otherSelections(ctx, reader, goc)
	if err != nil {
		return nil, err
	}
	for _, c := range sets.List(selected) {
		if why := names.ValidAgentName(c, principalNS); why != "" {
			obs.Invalid[c] = why
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
			if ownership.Less(o.goc, goc) {
				ownedByUs = false
			}
		}
		if len(otherNames) > 0 {
			obs.Conflict = append(obs.Conflict, fmt.Sprintf("%s (also selected by GitOpsCluster %s)", c, strings.Join(otherNames, ", ")))
		}
		if ownedByUs {
			obs.Owned.Insert(c)
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
func otherSelections(ctx context.Context, reader client.Reader, goc *v1alpha1.GitOpsCluster) ([]selection, error) {
	var list v1alpha1.GitOpsClusterList
	if err := reader.List(ctx, &list); err != nil {
		return nil, err
	}
	byPlacement := map[string]sets.Set[string]{}
	var out []selection
	for i := range list.Items {
		o := &list.Items[i]
		if (o.Namespace == goc.Namespace && o.Name == goc.Name) || !o.DeletionTimestamp.IsZero() {
			continue
		}
		key := ownership.PlacementKey(o.Namespace, o.Spec.PlacementRef.Name)
		sel, ok := byPlacement[key]
		if !ok {
			var err error
			if sel, err = ownership.SelectedClusters(ctx, reader, o.Namespace, o.Spec.PlacementRef.Name); err != nil {
				return nil, err
			}
			byPlacement[key] = sel
		}
		out = append(out, selection{goc: o, selected: sel})
	}
	sort.Slice(out, func(i, j int) bool { return ownership.Less(out[i].goc, out[j].goc) })
	return out, nil
}
