package signer_test

import (
	"context"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
)

// TestNoCertificateFromAPrincipalThatDoesNotAllowTheOwner: a tenant's GitOpsCluster that names
// a principal namespace whose allowed-gitopscluster-namespaces does not list the tenant's
// namespace gets no certificate signed with that principal's CA for the clusters it owns, even
// though the CA is there (another, allowed GitOpsCluster made it) and an AddOnTemplate of the
// tenant's names it.
func TestNoCertificateFromAPrincipalThatDoesNotAllowTheOwner(t *testing.T) {
	h := hub(t)
	ctx := context.Background()
	keys(t)
	const tenant, cluster = "intruders", "intruded"
	if err := h.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := h.admin.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// principalNS lists gitopsNS only.
	goc := &v1alpha1.GitOpsCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "g"},
		Spec: v1alpha1.GitOpsClusterSpec{
			PlacementRef:     v1alpha1.PlacementReference{Kind: v1alpha1.PlacementKind, Name: "g"},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{Mode: v1alpha1.AgentModeManaged, PrincipalNamespace: principalNS},
		},
	}
	if err := h.admin.Create(ctx, goc); err != nil {
		t.Fatal(err)
	}
	if err := fakehub.SetDecisionPage(ctx, h.admin, tenant, "g", 0, []string{cluster}); err != nil {
		t.Fatal(err)
	}
	// The template of a time the principal listed the tenant: only the allow-list refuses.
	tpl, err := addon.BuildAddOnTemplate(addon.TemplateInput{
		AddonName: addonName, TemplateName: names.TemplateName(goc), SignerName: signerName,
		SigningCANamespace: principalNS, CABundlePEM: h.ca.CertPEM, Mode: addon.ModeManaged,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.admin.Create(ctx, tpl); err != nil {
		t.Fatal(err)
	}
	csr := h.createCSR(t, agentOf(cluster), csrObject(cluster, signerName, requestPEM(t, p256, agentRequest(cluster))))
	done := h.waitFinal(t, csr.Name)
	if c := condition(done, certificatesv1.CertificateFailed); c == nil || c.Reason != signer.ReasonPrincipalNotAllowed || len(done.Status.Certificate) > 0 {
		t.Fatalf("CSR of a cluster whose owner may not use principal %s: %+v, certificate %d bytes", principalNS, done.Status.Conditions, len(done.Status.Certificate))
	}
	if c := condition(done, certificatesv1.CertificateApproved); c != nil {
		t.Errorf("the request was approved: %+v", c)
	}
}
