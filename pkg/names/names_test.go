package names

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

func TestNames(t *testing.T) {
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "gitops", Name: "fleet"}}
	if got := TemplateName(goc); got != "argocd-agent-gitops-fleet" {
		t.Errorf("TemplateName = %q", got)
	}
	if got := PrincipalNamespace(goc); got != "gitops" {
		t.Errorf("PrincipalNamespace without spec = %q, want the GitOpsCluster's namespace", got)
	}
	goc.Spec.ArgoCDAgentAddon.PrincipalNamespace = "argocd"
	if got := PrincipalNamespace(goc); got != "argocd" {
		t.Errorf("PrincipalNamespace with spec = %q, want argocd", got)
	}
	for _, tc := range []struct {
		cluster, ns string
		ok          bool
		why         string
	}{
		{"cluster1", "argocd", true, ""},
		{"argocd", "argocd", false, "principal namespace"},
		{"Cluster1", "argocd", false, "RFC 1123"},
		{"a.b", "argocd", false, "dots"},
		{strings.Repeat("a", 64), "argocd", false, "63"},
	} {
		why := ValidAgentName(tc.cluster, tc.ns)
		if (why == "") != tc.ok || !strings.Contains(why, tc.why) {
			t.Errorf("ValidAgentName(%q, %q) = %q, want ok=%v containing %q", tc.cluster, tc.ns, why, tc.ok, tc.why)
		}
	}
}
