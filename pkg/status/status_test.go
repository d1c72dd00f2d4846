package status

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

func TestTroubled(t *testing.T) {
	for _, tc := range []struct {
		typ    string
		status metav1.ConditionStatus
		want   bool
	}{
		{v1alpha1.ConditionReady, metav1.ConditionTrue, false},
		{v1alpha1.ConditionReady, metav1.ConditionFalse, true},
		{v1alpha1.ConditionCertificatesReady, metav1.ConditionUnknown, true},
		{v1alpha1.ConditionRevocationPaused, metav1.ConditionFalse, false},
		{v1alpha1.ConditionRevocationPaused, metav1.ConditionTrue, true},
		{v1alpha1.ConditionForeignArgoCD, metav1.ConditionFalse, false},
		{v1alpha1.ConditionForeignArgoCD, metav1.ConditionTrue, true},
	} {
		if got := troubled(metav1.Condition{Type: tc.typ, Status: tc.status}); got != tc.want {
			t.Errorf("%s=%s: troubled %v, want %v", tc.typ, tc.status, got, tc.want)
		}
	}
}
