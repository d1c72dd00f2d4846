package names

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

func TestNames(t *testing.T) {
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "gitops", Name: "fleet"}}
	if got := TemplateName(goc); got != "argocd-agent-gitops.fleet" {
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

// TestTemplateNamesNeverCollide: team-a/prod and team/a-prod gave the same name before; names
// stay valid DNS subdomains for the longest namespace and name.
func TestTemplateNamesNeverCollide(t *testing.T) {
	of := func(ns, name string) string {
		return TemplateName(&v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	if a, b := of("team-a", "prod"), of("team", "a-prod"); a == b {
		t.Errorf("team-a/prod and team/a-prod both give %s", a)
	}
	long := strings.Repeat("n", 63)
	seen := map[string]string{}
	for _, name := range []string{strings.Repeat("x", 253), strings.Repeat("x", 252) + "y", strings.Repeat("x", 240), "a.b.c"} {
		got := of(long, name)
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("%s/%s… gives an invalid name %q: %v", long[:5], name[:5], got, errs)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%q and %q give the same name %s", prev, name, got)
		}
		seen[got] = name
	}
}
