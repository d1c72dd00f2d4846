package testenv

import (
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ArgoCDInNamespace returns copies of Argo CD's upstream objects as its install places them in
// ns: namespaced objects move to ns, and the ServiceAccount subjects of ClusterRoleBindings,
// which install.yaml names in "argocd", follow. A RoleBinding's subjects name no namespace,
// which the authorizer reads as the binding's own.
func ArgoCDInNamespace(ns string, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		o := o.DeepCopy()
		switch o.GetKind() {
		case "ClusterRoleBinding":
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				if s := s.(map[string]any); s["kind"] == rbacv1.ServiceAccountKind {
					s["namespace"] = ns
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
		case "ClusterRole", "CustomResourceDefinition": // the install's other cluster-scoped kinds
		default:
			o.SetNamespace(ns)
		}
		out = append(out, o)
	}
	return out
}
