package gitopscluster_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// principalAllowing makes principal namespace ns, which lets the GitOpsClusters of allowed use
// it.
func principalAllowing(t *testing.T, ns, allowed string) {
	t.Helper()
	ctx := context.Background()
	createNamespace(t, ns)
	n := &corev1.Namespace{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: ns}, n); err != nil {
		t.Fatal(err)
	}
	n.Annotations = map[string]string{v1alpha1.AnnotationAllowedGitOpsClusterNamespaces: allowed}
	if err := k8s.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// TestNotAllowedGitOpsClusterDecidesNoApplicationMapping: a tenant's managed GitOpsCluster that
// names a principal namespace not listing it, older than the principal's own and asking for
// another applicationMapping, does not count: the principal's own GitOpsCluster is configured
// with no ApplicationMappingConflict.
func TestNotAllowedGitOpsClusterDecidesNoApplicationMapping(t *testing.T) {
	t.Parallel()
	principalAllowing(t, "nm-principal", "nm-team")
	for _, ns := range []string{"nm-tenant", "nm-team"} {
		createNamespace(t, ns)
		createPlacement(t, ns, "p")
		setDecisions(t, ns, "p", 0)
	}
	onPrincipal := func(g *v1alpha1.GitOpsCluster) { g.Spec.ArgoCDAgentAddon.PrincipalNamespace = "nm-principal" }
	createGitOpsCluster(t, "nm-tenant", "g", "p", onPrincipal, withAddress("principal.example.com"), withMapping(v1alpha1.ApplicationMappingDestination))
	conditionIs(t, "nm-tenant", "g", v1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, v1alpha1.ReasonPrincipalNotAllowed)
	time.Sleep(1100 * time.Millisecond) // the team's must be younger, so the tenant's would decide if it counted
	createGitOpsCluster(t, "nm-team", "g", "p", onPrincipal, withAddress("principal.example.com"), withMapping(v1alpha1.ApplicationMappingNamespace))
	conditionIs(t, "nm-team", "g", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)
	touch(t, "nm-team", "g")
	conditionIs(t, "nm-team", "g", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)
}

// TestNotAllowedGitOpsClusterRegistersNoAgentOnThePrincipal: on a principal whose PKI the
// allowed GitOpsCluster has made, a tenant's GitOpsCluster that names it without being allowed
// gets none of its clusters registered there (no cluster secret) and no AddOnTemplate pointing
// its agents at it (the signer's side: TestNoCertificateFromAPrincipalThatDoesNotAllowTheOwner).
func TestNotAllowedGitOpsClusterRegistersNoAgentOnThePrincipal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	principalAllowing(t, "nr-principal", "nr-team")
	createManagedClusters(t, "nr-team-c", "nr-tenant-c")
	for ns, cluster := range map[string]string{"nr-team": "nr-team-c", "nr-tenant": "nr-tenant-c"} {
		createNamespace(t, ns)
		createPlacement(t, ns, "p")
		setDecisions(t, ns, "p", 0, cluster)
	}
	onPrincipal := func(g *v1alpha1.GitOpsCluster) { g.Spec.ArgoCDAgentAddon.PrincipalNamespace = "nr-principal" }
	createGitOpsCluster(t, "nr-team", "g", "p", onPrincipal, withAddress("principal.example.com"))
	conditionIs(t, "nr-team", "g", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonCertificatesIssued)
	tenant := createGitOpsCluster(t, "nr-tenant", "g", "p", onPrincipal, withAddress("principal.example.com"))
	conditionIs(t, "nr-tenant", "g", v1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, v1alpha1.ReasonPrincipalNotAllowed)
	touch(t, "nr-tenant", "g")
	conditionIs(t, "nr-tenant", "g", v1alpha1.ConditionAddOnConfigured, metav1.ConditionFalse, v1alpha1.ReasonPrincipalNotAllowed)

	if err := k8s.Get(ctx, types.NamespacedName{Namespace: "nr-principal", Name: agentsecret.Name("nr-team-c")}, &corev1.Secret{}); err != nil {
		t.Fatalf("the allowed GitOpsCluster's cluster is not registered, so this test proves nothing: %v", err)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: "nr-principal", Name: agentsecret.Name("nr-tenant-c")}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the not-allowed GitOpsCluster's cluster has a cluster secret on the principal (err %v)", err)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Name: names.TemplateName(tenant)}, &addonv1alpha1.AddOnTemplate{}); !apierrors.IsNotFound(err) {
		t.Errorf("the not-allowed GitOpsCluster has an AddOnTemplate (err %v)", err)
	}
}
