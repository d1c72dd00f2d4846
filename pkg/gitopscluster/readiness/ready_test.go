package readiness

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

func TestNotReady(t *testing.T) {
	cond := func(t string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: t, Status: s}
	}
	allTrue := func() []metav1.Condition {
		var out []metav1.Condition
		for _, t := range ReadyStandsFor {
			out = append(out, cond(t, metav1.ConditionTrue))
		}
		return out
	}
	with := func(t string, s metav1.ConditionStatus) []metav1.Condition {
		out := allTrue()
		for i := range out {
			if out[i].Type == t {
				out[i].Status = s
			}
		}
		return out
	}
	without := func(t string) []metav1.Condition {
		return slices.DeleteFunc(allTrue(), func(c metav1.Condition) bool { return c.Type == t })
	}
	cases := []struct {
		name       string
		conditions []metav1.Condition
		want       []string
	}{
		{"all true", allTrue(), nil},
		{"no conditions yet", nil, ReadyStandsFor},
		{"agents unavailable", with(v1alpha1.ConditionAgentsAvailable, metav1.ConditionFalse), []string{v1alpha1.ConditionAgentsAvailable}},
		{"unknown counts as not true", with(v1alpha1.ConditionCertificatesReady, metav1.ConditionUnknown), []string{v1alpha1.ConditionCertificatesReady}},
		{"a missing one counts", without(v1alpha1.ConditionPrincipalDiscovered), []string{v1alpha1.ConditionPrincipalDiscovered}},
		{"conditions Ready does not stand for are ignored", append(allTrue(),
			cond(v1alpha1.ConditionRevocationPaused, metav1.ConditionTrue), cond(v1alpha1.ConditionSignerExclusive, metav1.ConditionFalse)), nil},
		{"listed in order", append(with(v1alpha1.ConditionAgentsAvailable, metav1.ConditionFalse)[1:], cond(v1alpha1.ConditionPlacementResolved, metav1.ConditionFalse)),
			[]string{v1alpha1.ConditionPlacementResolved, v1alpha1.ConditionAgentsAvailable}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NotReady(tc.conditions); !slices.Equal(got, tc.want) {
				t.Errorf("NotReady = %v, want %v", got, tc.want)
			}
		})
	}
}
