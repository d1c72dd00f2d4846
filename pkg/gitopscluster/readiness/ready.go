// Package readiness says how a GitOpsCluster's fleet stands: which agents are available, and
// whether the conditions Ready stands for all hold.
package readiness

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// ReadyStandsFor are the conditions that must all be True for a GitOpsCluster to be Ready, in
// the order a message lists them.
var ReadyStandsFor = []string{
	v1alpha1.ConditionPlacementResolved,
	v1alpha1.ConditionPrincipalDiscovered,
	v1alpha1.ConditionCertificatesReady,
	v1alpha1.ConditionAddOnConfigured,
	v1alpha1.ConditionAgentsAvailable,
}

// NotReady returns the conditions of ReadyStandsFor that are not True in conditions (missing
// ones included): none means Ready.
func NotReady(conditions []metav1.Condition) []string {
	var out []string
	for _, t := range ReadyStandsFor {
		if !meta.IsStatusConditionTrue(conditions, t) {
			out = append(out, t)
		}
	}
	return out
}
