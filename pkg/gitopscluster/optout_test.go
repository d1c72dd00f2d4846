package gitopscluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

func labelManagedCluster(t *testing.T, cluster, value string) {
	t.Helper()
	ctx := context.Background()
	mc := &clusterv1.ManagedCluster{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: cluster}, mc); err != nil {
		t.Fatal(err)
	}
	base := mc.DeepCopy()
	if mc.Labels == nil {
		mc.Labels = map[string]string{}
	}
	if value == "" {
		delete(mc.Labels, v1alpha1.LabelArgoCDComponents)
	} else {
		mc.Labels[v1alpha1.LabelArgoCDComponents] = value
	}
	if err := k8s.Patch(ctx, mc, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

var excludeExisting = metav1.LabelSelectorRequirement{Key: v1alpha1.LabelArgoCDComponents, Operator: metav1.LabelSelectorOpNotIn,
	Values: []string{string(v1alpha1.ArgoCDComponentsExisting)}}

// The components are installed by a copy of the user's Placement that leaves out the clusters
// labelled to keep their own Argo CD, so OCM never renders Argo CD's objects there; the agent
// keeps the user's Placement, which is never written.
func TestClusterLabelKeepsItsOwnArgoCD(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "optout"
	createNamespace(t, ns)
	createManagedClusters(t, "oo-own", "oo-new")
	labelManagedCluster(t, "oo-own", string(v1alpha1.ArgoCDComponentsExisting))
	user := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: clusterv1beta1.PlacementSpec{
		Predicates: []clusterv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterv1beta1.ClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}}},
		Tolerations: []clusterv1beta1.Toleration{{Key: "cluster.open-cluster-management.io/unreachable", Operator: clusterv1beta1.TolerationOpExists}},
	}}
	if err := k8s.Create(ctx, user); err != nil {
		t.Fatal(err)
	}
	userRV := user.ResourceVersion
	setDecisions(t, ns, "p", 1, "oo-own", "oo-new")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	goc := getGOC(t, ns, "fleet")
	derived := names.ComponentsPlacementName(goc)

	eventually(t, "the components' Placement leaves out the labelled cluster", func() error {
		pl := &clusterv1beta1.Placement{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: derived}, pl); err != nil {
			return err
		}
		if len(pl.Spec.Predicates) != 1 {
			return fmt.Errorf("predicates %+v", pl.Spec.Predicates)
		}
		sel := pl.Spec.Predicates[0].RequiredClusterSelector.LabelSelector
		if sel.MatchLabels["env"] != "prod" || !slices.ContainsFunc(sel.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
			return r.Key == excludeExisting.Key && r.Operator == excludeExisting.Operator && slices.Equal(r.Values, excludeExisting.Values)
		}) {
			return fmt.Errorf("selector %+v lacks the user's predicate or the exclusion", sel)
		}
		if len(pl.Spec.Tolerations) != 1 {
			return fmt.Errorf("tolerations %+v not copied", pl.Spec.Tolerations)
		}
		if e, err := componentsEntry(t, ns, derived); err != nil || e == nil {
			return fmt.Errorf("components entry on %s missing (%v)", derived, err)
		}
		if n := getGOC(t, ns, "fleet").Status.ExistingArgoCDClusters; n != 1 {
			return fmt.Errorf("existingArgoCDClusters = %d", n)
		}
		return nil
	})
	if _, ok := cmaEntries(t)[ns+"/p"]; !ok {
		t.Errorf("the agent's entry does not name the user's Placement")
	}
	if e, _ := componentsEntry(t, ns, "p"); e != nil {
		t.Errorf("the components addon lists the user's Placement too")
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(user), user); err != nil || user.ResourceVersion != userRV {
		t.Errorf("the user's Placement was written (%v)", err)
	}

	// The user edits the Placement: the copy follows.
	base := user.DeepCopy()
	user.Spec.Predicates[0].RequiredClusterSelector.LabelSelector.MatchLabels["env"] = "staging"
	if err := k8s.Patch(ctx, user, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the copy follows the user's edit", func() error {
		pl := &clusterv1beta1.Placement{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: derived}, pl); err != nil {
			return err
		}
		if got := pl.Spec.Predicates[0].RequiredClusterSelector.LabelSelector.MatchLabels["env"]; got != "staging" {
			return fmt.Errorf("env = %q", got)
		}
		return nil
	})

	// numberOfClusters picks the best N candidates: the copy takes the clusters the manager
	// cleared, which are only ever the user's selected ones, so it keeps no numberOfClusters
	// (the best N of fewer candidates could be others) and the label still counts.
	base = user.DeepCopy()
	user.Spec.NumberOfClusters = ptr.To[int32](2)
	if err := k8s.Patch(ctx, user, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "components by the copy, without numberOfClusters", func() error {
		pl := &clusterv1beta1.Placement{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: derived}, pl); err != nil {
			return err
		}
		if pl.Spec.NumberOfClusters != nil {
			return fmt.Errorf("the copy has numberOfClusters %d", *pl.Spec.NumberOfClusters)
		}
		if e, _ := componentsEntry(t, ns, "p"); e != nil {
			return fmt.Errorf("components entry on the user's Placement")
		}
		if n := getGOC(t, ns, "fleet").Status.ExistingArgoCDClusters; n != 1 {
			return fmt.Errorf("existingArgoCDClusters = %d", n)
		}
		return nil
	})
}

// A Placement of the copy's name that the manager did not make is never overwritten.
func TestComponentsPlacementNameTakenIsReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "optout-taken"
	createNamespace(t, ns)
	createManagedClusters(t, "ot-1")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "ot-1")
	theirs := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-components-fleet"},
		Spec: clusterv1beta1.PlacementSpec{ClusterSets: []string{"theirs"}}}
	if err := k8s.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	g := conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionFalse, v1alpha1.ReasonAddOnApplyFailed)
	if c := findCond(g, v1alpha1.ConditionAddOnConfigured); c == nil || !strings.Contains(c.Message, "not overwritten") {
		t.Errorf("AddOnConfigured does not say why: %+v", c)
	}
	got := &clusterv1beta1.Placement{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(theirs), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("their Placement was written")
	}
}
