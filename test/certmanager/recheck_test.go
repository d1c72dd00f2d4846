package certmanager_test

import (
	"context"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	pkgcm "github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// The manager watches none of cert-manager's kinds. A Certificate that turns not Ready while
// its Secret stays as it was (a renewal its issuer refuses, say) wakes nothing, so the
// manager looks again on its own (--cert-manager-recheck) and reports it.
func TestCertificateTurningNotReadyIsSeenWithoutASecretChange(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.ErrorLevel)))
	env := testenv.StartForTest(t, testenv.Options{WithCertManager: true})
	admin := env.Client
	// The hub operator allows the external issuer (its kind is not served here, so the manager
	// cannot tell that it is namespaced).
	defer startManager(t, env.Config, func(o *manager.Options) {
		o.Fleet.CertManagerRecheck = 2 * time.Second
		o.Fleet.CertManagerAllowedIssuers = []string{"issuers.example.com/CorpIssuer/corp"}
	})()

	mustCreate(t, admin,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "placement"}},
		&v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
			Spec: v1alpha1.GitOpsClusterSpec{PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: "placement"},
				ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{PrincipalServerAddress: "principal.example.com",
					CertManager: &v1alpha1.CertManagerPKI{IssuerRef: v1alpha1.CertManagerIssuerReference{
						Group: "issuers.example.com", Kind: "CorpIssuer", Name: "corp"}}}}},
	)

	now := time.Now()
	agentsCA, err := pki.NewCA("argocd-agent-ca", 365*24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	serving := func(host string) map[string][]byte {
		kp, err := agentsCA.IssueServerCert(host, []string{host}, nil, 90*24*time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{"tls.crt": kp.CertPEM, "tls.key": kp.KeyPEM, "ca.crt": agentsCA.CertPEM}
	}
	issueByHand(t, admin, pkgcm.CACertificateName, map[string][]byte{"tls.crt": agentsCA.CertPEM, "tls.key": agentsCA.KeyPEM, "ca.crt": agentsCA.CertPEM})
	issueByHand(t, admin, principalTL, serving("principal.example.com"))
	issueByHand(t, admin, names.ResourceProxySecretName, serving("argocd-agent-resource-proxy"))
	waitCertificatesReady(t, admin, "cert-manager, issued by hand")

	ca := &cmapi.Certificate{}
	if err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: pkgcm.CACertificateName}, ca); err != nil {
		t.Fatal(err)
	}
	setReady(t, admin, ca, cmmeta.ConditionFalse, "Failed", "the issuer refused the renewal")
	waitCondition(t, admin, ns, v1alpha1.ReasonCertManagerCertNotReady, "the issuer refused the renewal")
}
