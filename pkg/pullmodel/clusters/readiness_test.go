package clusters

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// TestReadiness: the first problem in the order a person should fix them decides Ready.
func TestReadiness(t *testing.T) {
	reg := &v1alpha1.ArgoCDClusterRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "fleet"}}
	for _, tc := range []struct {
		name    string
		out     registration
		unknown string
		status  metav1.ConditionStatus
		reason  string
	}{
		{"all registered", registration{}, "", metav1.ConditionTrue, ReasonRegistered},
		{"departures wait on an unknown selection", registration{}, "the Placement is being updated", metav1.ConditionTrue, ReasonSelectionUnknown},
		{"a cluster without a ManagedCluster", registration{pending: []string{"c1"}}, "x", metav1.ConditionFalse, ReasonClustersPending},
		{"a name too long", registration{invalid: []string{"c1"}, pending: []string{"c2"}}, "", metav1.ConditionFalse, ReasonClustersPending},
		{"someone else's Secret comes first", registration{conflicts: []string{"c1"}, invalid: []string{"c2"}, pending: []string{"c3"}}, "x", metav1.ConditionFalse, ReasonSecretConflict},
		{"write errors are returned, not shown here", registration{errs: []error{errors.New("boom")}}, "", metav1.ConditionTrue, ReasonRegistered},
	} {
		c := readiness(reg, "p", tc.out, tc.unknown, 3)
		if c.Status != tc.status || c.Reason != tc.reason || c.Type != ConditionReady || c.Message == "" {
			t.Errorf("%s: %s=%s %s (%q), want %s %s", tc.name, c.Type, c.Status, c.Reason, c.Message, tc.status, tc.reason)
		}
	}
}
