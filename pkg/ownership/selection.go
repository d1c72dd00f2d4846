package ownership

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// SelectionUnknown says why a Placement's decisions may not be read as its whole selection, or
// "" when they may: it is being deleted (decisions go first), it has no PlacementDecision yet
// (a re-created Placement), or OCM's scheduler has reported a different number of clusters than
// the pages hold (pages mid-update). Every revocation, deletion and removal waits while it says
// something.
func SelectionUnknown(pl *clusterv1beta1.Placement, selected sets.Set[string], pages int) string {
	switch {
	case !pl.DeletionTimestamp.IsZero():
		return "the Placement is being deleted"
	case pages == 0:
		return "the Placement has no PlacementDecision yet"
	case meta.FindStatusCondition(pl.Status.Conditions, clusterv1beta1.PlacementConditionSatisfied) != nil &&
		int(pl.Status.NumberOfSelectedClusters) != selected.Len():
		return fmt.Sprintf("the Placement reports %d selected cluster(s) but its decisions list %d (OCM is rewriting them)", pl.Status.NumberOfSelectedClusters, selected.Len())
	}
	return ""
}

// DecisionsChanged ignores PlacementDecision updates that leave the decisions and labels as
// they were.
func DecisionsChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*clusterv1beta1.PlacementDecision)
		n, ok2 := e.ObjectNew.(*clusterv1beta1.PlacementDecision)
		return !ok1 || !ok2 || !reflect.DeepEqual(o.Status.Decisions, n.Status.Decisions) || !reflect.DeepEqual(o.Labels, n.Labels)
	}}
}

// MaxListedClusters bounds the cluster names a status message or condition lists.
const MaxListedClusters = 10

// Summarize lists items, sorted, for a message: at most MaxListedClusters of them, then how
// many more there are, so messages stay bounded on fleets of thousands of clusters.
func Summarize(items []string) string {
	sort.Strings(items)
	if len(items) <= MaxListedClusters {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:MaxListedClusters], ", "), len(items)-MaxListedClusters)
}
