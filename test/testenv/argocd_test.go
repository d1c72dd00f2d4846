package testenv

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
)

// Argo CD's RBAC placed in another namespace binds that namespace's ServiceAccounts, and the
// upstream objects it was made from are left as they were.
func TestArgoCDInNamespaceMovesItsRBAC(t *testing.T) {
	upstream, err := spoke.Objects(addon.ModeAutonomous)
	if err != nil {
		t.Fatal(err)
	}
	placed := ArgoCDInNamespace("gitops", upstream)
	kinds := map[string]int{}
	for i, o := range placed {
		kinds[o.GetKind()]++
		switch o.GetKind() {
		case "ClusterRole", "CustomResourceDefinition":
			if o.GetNamespace() != "" {
				t.Errorf("%s %s placed in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
			}
		case "ClusterRoleBinding":
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				if ns := s.(map[string]any)["namespace"]; ns != "gitops" {
					t.Errorf("ClusterRoleBinding %s binds a ServiceAccount of namespace %v", o.GetName(), ns)
				}
			}
			was, _, _ := unstructured.NestedSlice(upstream[i].Object, "subjects")
			if len(was) == 0 {
				t.Errorf("the upstream ClusterRoleBinding %s has no subjects", o.GetName())
			}
			for _, s := range was {
				if ns := s.(map[string]any)["namespace"]; ns != "argocd" {
					t.Errorf("the upstream ClusterRoleBinding %s changed: its subject's namespace is %v", o.GetName(), ns)
				}
			}
		case "RoleBinding":
			// Its subjects name no namespace and so bind the ServiceAccounts of its own.
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subjects {
				if ns, named := s.(map[string]any)["namespace"]; named && ns != "gitops" {
					t.Errorf("RoleBinding %s binds a subject of namespace %v", o.GetName(), ns)
				}
			}
			if o.GetNamespace() != "gitops" {
				t.Errorf("RoleBinding %s placed in namespace %q", o.GetName(), o.GetNamespace())
			}
		default:
			if o.GetNamespace() != "gitops" {
				t.Errorf("%s %s placed in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
			}
		}
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding", "Role", "ServiceAccount", "Deployment"} {
		if kinds[kind] == 0 {
			t.Errorf("Argo CD's install has no %s to place", kind)
		}
	}
}
