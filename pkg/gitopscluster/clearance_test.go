package gitopscluster_test

import (
	"context"
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// denyLabel makes the API server refuse any update of ManagedCluster cluster that adds the label
// key, as a hub admin's admission policy might, until the returned function lifts it.
func denyLabel(t *testing.T, cluster, key string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	name := "deny-" + cluster
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"cluster.open-cluster-management.io"}, APIVersions: []string{"*"}, Resources: []string{"managedclusters"}},
				},
			}}},
			MatchConditions: []admissionv1.MatchCondition{{Name: "the-cluster", Expression: fmt.Sprintf("object.metadata.name == %q", cluster)}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!has(object.metadata.labels) || !(%q in object.metadata.labels)", key),
				Message:    "this hub does not let that label be set",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The API server loads a policy a moment after its creation: wait until a dry run is refused.
	eventually(t, "the API server refuses the label on "+cluster, func() error {
		mc := &clusterv1.ManagedCluster{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
			return err
		}
		metav1.SetMetaDataLabel(&mc.ObjectMeta, key, "true")
		if err := k8s.Update(ctx, mc, client.DryRunAll); err == nil {
			return fmt.Errorf("a dry run was let through")
		}
		return nil
	})
	lift = func() {
		for _, o := range []client.Object{binding, policy} {
			if err := client.IgnoreNotFound(k8s.Delete(ctx, o)); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(lift)
	return lift
}

// TestClearanceRefusedIsRetried: a clearance label the API server refuses is a failed write:
// the GitOpsCluster says so in an Event and tries again, backing off, until it is written,
// without waiting for anything else to change.
func TestClearanceRefusedIsRetried(t *testing.T) {
	const ns, cluster = "clearance-refused", "cr-denied"
	goc := fleetOfOne(t, ns, cluster)
	key := names.ComponentsClearedLabel(goc)
	lift := denyLabel(t, cluster, key)

	reportProbe(t, cluster, goc)
	eventually(t, "a ClearanceFailed Event naming the cluster", func() error {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "fleet" && e.Reason == "ClearanceFailed" {
				return nil
			}
		}
		var seen []string
		for _, e := range list.Items {
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return fmt.Errorf("none among %d Events: %v; labels %v", len(list.Items), seen, clusterLabels(t, cluster))
	})
	if _, ok := clusterLabels(t, cluster)[key]; ok {
		t.Fatal("the cluster is cleared although the API server refuses the label")
	}

	lift()
	eventually(t, "the cluster cleared once the API server lets the label be set", func() error {
		if _, ok := clusterLabels(t, cluster)[key]; !ok {
			return fmt.Errorf("not cleared")
		}
		return nil
	})
}
