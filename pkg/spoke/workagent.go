package spoke

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// PullModelWorkAgentRoleName names the ClusterRole that lets OCM's work agent apply the basic
// pull model's Applications.
const PullModelWorkAgentRoleName = "open-cluster-management:argocd-pull-model:work"

// PullModelWorkAgentRole is the ClusterRole OCM's work agent needs to apply the basic pull
// model's ManifestWorks: a stock klusterlet's work agent holds the admin role and OCM's own
// execution rights, and none of them covers Argo CD's Applications (Argo CD ships no roles
// aggregated to admin). The label aggregates it into the work agent's role
// (open-cluster-management:<klusterlet>-work:aggregate), whatever the klusterlet's name or
// mode. It grants Applications only: the pull model delivers nothing else.
func PullModelWorkAgentRole() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "ClusterRole",
		"metadata": map[string]any{
			"name":   PullModelWorkAgentRoleName,
			"labels": map[string]any{"open-cluster-management.io/aggregate-to-work": "true"},
		},
		"rules": []any{map[string]any{
			"apiGroups": []any{"argoproj.io"},
			"resources": []any{"applications"},
			"verbs":     []any{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}}
}
