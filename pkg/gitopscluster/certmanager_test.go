package gitopscluster_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

func withIssuer(name string) func(*v1alpha1.GitOpsCluster) {
	return func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.CertManager = &v1alpha1.CertManagerPKI{IssuerRef: v1alpha1.CertManagerIssuerReference{Name: name}}
	}
}

// This suite's API server has no cert-manager CRDs, like a hub without cert-manager: the
// manager runs, and a GitOpsCluster that names an issuer gets a condition saying so instead
// of a CA, until its issuer is removed.
func TestCertManagerNotInstalledIsACondition(t *testing.T) {
	t.Parallel()
	ns := "cm-absent"
	createNamespace(t, ns)
	createPlacement(t, ns, "p")
	createGitOpsCluster(t, ns, "goc", "p", withAddress("principal.example.com"), withIssuer("corp-ca"))

	g := conditionIs(t, ns, "goc", v1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, v1alpha1.ReasonCertManagerNotInstalled)
	if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready: %+v", c)
	}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: names.CASecretName}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("no CA may be minted while the GitOpsCluster asks for cert-manager: got %v", err)
	}

	g.Spec.ArgoCDAgentAddon.CertManager = nil
	if err := k8s.Update(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	conditionIs(t, ns, "goc", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonCertificatesIssued)
}

// The PKI belongs to the principal namespace: the oldest GitOpsCluster using it decides, and a
// younger one asking for another PKI is told so and changes nothing.
func TestPKIConflictBetweenGitOpsClustersOfOnePrincipal(t *testing.T) {
	t.Parallel()
	ns := "cm-conflict"
	createNamespace(t, ns)
	createPlacement(t, ns, "p1")
	createPlacement(t, ns, "p2")
	createGitOpsCluster(t, ns, "a-self", "p1", withAddress("principal.example.com"))
	conditionIs(t, ns, "a-self", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonCertificatesIssued)
	ca := &corev1.Secret{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: names.CASecretName}, ca); err != nil {
		t.Fatal(err)
	}

	createGitOpsCluster(t, ns, "b-cert-manager", "p2", withAddress("principal.example.com"), withIssuer("corp-ca"))
	conditionIs(t, ns, "b-cert-manager", v1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, v1alpha1.ReasonPKIConflict)
	conditionIs(t, ns, "a-self", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonCertificatesIssued)
	after := &corev1.Secret{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: names.CASecretName}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != ca.ResourceVersion {
		t.Errorf("the conflicting GitOpsCluster changed the principal's CA secret")
	}
}

// cert-manager keeps a second copy of the agents' CA key in the principal namespace: a grant
// letting OCM's addon-manager read that one is reported like a grant on the CA secret itself.
func TestSignerExclusiveCoversTheCertManagerCASecret(t *testing.T) {
	ctx := context.Background()
	const ns = "exclusive-cm"
	createNamespace(t, ns)
	createPlacement(t, ns, "p")
	createGitOpsCluster(t, ns, "g", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "g", v1alpha1.ConditionSignerExclusive, metav1.ConditionTrue, v1alpha1.ReasonCANotReadableByOCM)

	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ocm-reads-cm-ca"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{certmanager.CAIssuedSecretName}, Verbs: []string{"get"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ocm-reads-cm-ca"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ocm-reads-cm-ca"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "open-cluster-management-hub", Name: "addon-manager-controller-sa"}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The answer is cached per principal; a new manager asks again.
	stopManager()
	startManager()
	touch(t, ns, "g")
	g := conditionIs(t, ns, "g", v1alpha1.ConditionSignerExclusive, metav1.ConditionFalse, v1alpha1.ReasonCAReadableByOCM)
	if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionSignerExclusive); !strings.Contains(c.Message, ns+"/"+certmanager.CAIssuedSecretName) {
		t.Errorf("message does not name the readable secret: %s", c.Message)
	}
}
