package certmanager_test

import (
	"context"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	pkgcm "github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// An external issuer that gives no CA with the principal's serving certificate (cert-manager
// writes ca.crt only from the CertificateRequest's status.ca, which such an issuer leaves
// empty): agents could not verify the principal with it, so the principal keeps the
// certificate it serves and the condition says why (IssuerGivesNoCA). cert-manager's
// controllers do not run here; the test writes what they would for such an issuer: each
// Certificate's Secret and its Ready condition.
func TestIssuerGivingNoCAKeepsThePrincipalCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.ErrorLevel)))
	env := testenv.StartForTest(t, testenv.Options{WithCertManager: true})
	admin := env.Client

	// The hub operator allows the external issuer (its kind is not served here).
	defer startManager(t, env.Config, func(o *manager.Options) {
		o.Fleet.CertManagerAllowedIssuers = []string{"issuers.example.com/CorpIssuer/corp"}
	})()

	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: v1alpha1.GitOpsClusterSpec{PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: "placement"},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{PrincipalServerAddress: "principal.example.com"}}}
	mustCreate(t, admin,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "placement"}},
		goc,
	)
	waitCertificatesReady(t, admin, "self-managed")
	served := secret(t, admin, principalTL)

	// The manager writes the GitOpsCluster too: setIssuer reads it again on a conflict.
	setIssuer(t, admin, &v1alpha1.CertManagerPKI{IssuerRef: v1alpha1.CertManagerIssuerReference{
		Group: "issuers.example.com", Kind: "CorpIssuer", Name: "corp"}})

	// The issuer's CA for the agents, which signs the serving certificates too.
	now := time.Now()
	agentsCA, err := pki.NewCA("argocd-agent-ca", 365*24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	serving := func(host string) *pki.KeyPair {
		kp, err := agentsCA.IssueServerCert(host, []string{host}, nil, 90*24*time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	principal, proxy := serving("principal.example.com"), serving("argocd-agent-resource-proxy")
	issued := map[string]map[string][]byte{
		pkgcm.CACertificateName: {"tls.crt": agentsCA.CertPEM, "tls.key": agentsCA.KeyPEM, "ca.crt": agentsCA.CertPEM},
		// The leaf alone: no ca.crt, and no CA above it in tls.crt.
		principalTL:                   {"tls.crt": principal.CertPEM, "tls.key": principal.KeyPEM},
		names.ResourceProxySecretName: {"tls.crt": proxy.CertPEM, "tls.key": proxy.KeyPEM, "ca.crt": agentsCA.CertPEM},
	}
	for name, data := range issued {
		issueByHand(t, admin, name, data)
	}

	waitCondition(t, admin, ns, v1alpha1.ReasonIssuerNoCAAnchor, "no ca.crt")
	// The agents' CA from the issuer is in use; only the principal's switch is refused.
	if ca := caSecret(t, admin); string(ca.Data["tls.crt"]) != string(agentsCA.CertPEM) {
		t.Error("the issuer's agents' CA was not taken into the CA secret")
	}
	now2 := secret(t, admin, principalTL)
	if string(now2.Data["tls.crt"]) != string(served.Data["tls.crt"]) || string(now2.Data["tls.key"]) != string(served.Data["tls.key"]) ||
		string(now2.Data["ca.crt"]) != string(served.Data["ca.crt"]) {
		t.Error("the principal's serving secret changed: it took a certificate agents cannot verify")
	}
}

// issueByHand does what cert-manager's controllers would for an issuer that gave data:
// writes the Certificate's Secret and marks it Ready for its generation.
func issueByHand(t *testing.T, admin client.Client, name string, data map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	c := &cmapi.Certificate{}
	eventually(t, "the manager creates Certificate "+name, func() error {
		return admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c)
	})
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.Spec.SecretName, Labels: c.Spec.SecretTemplate.Labels}}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(s), s); apierrors.IsNotFound(err) {
		s.Type, s.Data = corev1.SecretTypeTLS, data
		if err := admin.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	} else {
		s.Data = data
		if err := admin.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	setReady(t, admin, c, cmmeta.ConditionTrue, "Ready", "written by the test")
}

// setReady writes the Certificate's Ready condition, as cert-manager's readiness controller.
func setReady(t *testing.T, admin client.Client, c *cmapi.Certificate, status cmmeta.ConditionStatus, reason, message string) {
	t.Helper()
	c.Status.Conditions = []cmapi.CertificateCondition{{Type: cmapi.CertificateConditionReady, Status: status,
		Reason: reason, Message: message, ObservedGeneration: c.Generation}}
	if err := admin.Status().Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}
