package certmanager

import (
	"net"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

func TestIssuerRefDefaultsCompareEqual(t *testing.T) {
	a := IssuerRef(v1alpha1.CertManagerIssuerReference{Name: "corp"})
	b := IssuerRef(v1alpha1.CertManagerIssuerReference{Name: "corp", Kind: "Issuer", Group: "cert-manager.io"})
	if a != b {
		t.Errorf("%+v != %+v", a, b)
	}
	if got := DescribeIssuer("argocd", a); got != "Issuer argocd/corp" {
		t.Errorf("DescribeIssuer = %q", got)
	}
}

func TestCertificatesAskForWhatThePrincipalNeeds(t *testing.T) {
	ref := cmmeta.IssuerReference{Name: "corp", Kind: "ClusterIssuer", Group: "cert-manager.io"}
	labels := map[string]string{"app.kubernetes.io/managed-by": "argocd-agent-addon"}
	ca := CACertificate("argocd", ref, labels)
	if !ca.Spec.IsCA || ca.Spec.SecretName != CAIssuedSecretName || ca.Spec.PrivateKey.RotationPolicy != cmapi.RotationPolicyAlways {
		t.Errorf("CA Certificate spec %+v", ca.Spec)
	}
	srv := ServingCertificate("argocd", "argocd-agent-principal-tls", PrincipalIssuedSecretName, []string{"p.example.com"}, []net.IP{net.ParseIP("192.0.2.1")}, ref, labels)
	if srv.Spec.IsCA || srv.Name != "argocd-agent-principal-tls" || srv.Spec.SecretName != PrincipalIssuedSecretName || srv.Spec.IPAddresses[0] != "192.0.2.1" ||
		srv.Spec.Usages[0] != cmapi.UsageServerAuth || srv.Spec.SecretTemplate.Labels["app.kubernetes.io/managed-by"] != "argocd-agent-addon" {
		t.Errorf("serving Certificate spec %+v", srv.Spec)
	}
	labels["x"] = "changed"
	if _, ok := srv.Labels["x"]; ok {
		t.Error("the builder shares the caller's label map")
	}

	existing := srv.DeepCopy()
	existing.Labels["other"] = "kept"
	if NeedsUpdate(existing, srv) {
		t.Error("an extra label someone else set is not a difference")
	}
	existing.Spec.DNSNames = []string{"old.example.com"}
	if !NeedsUpdate(existing, srv) {
		t.Error("changed SANs must be written")
	}
}

func TestReadyNeedsTheCurrentGeneration(t *testing.T) {
	c := &cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "x", Generation: 2}}
	if ok, why := Ready(c); ok || !strings.Contains(why, "no Ready condition") {
		t.Errorf("no condition: %v %q", ok, why)
	}
	c.Status.Conditions = []cmapi.CertificateCondition{{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionTrue, ObservedGeneration: 1}}
	if ok, _ := Ready(c); ok {
		t.Error("Ready for an older spec counts as ready")
	}
	c.Status.Conditions[0].ObservedGeneration = 2
	if ok, why := Ready(c); !ok {
		t.Errorf("not ready: %s", why)
	}
	c.Status.Conditions[0].Status, c.Status.Conditions[0].Reason, c.Status.Conditions[0].Message = cmmeta.ConditionFalse, "Failed", "issuer says no"
	if ok, why := Ready(c); ok || !strings.Contains(why, "issuer says no") {
		t.Errorf("failed: %v %q", ok, why)
	}
}

func TestIssuerReady(t *testing.T) {
	st := &cmapi.IssuerStatus{Conditions: []cmapi.IssuerCondition{{Type: cmapi.IssuerConditionReady, Status: cmmeta.ConditionFalse, Reason: "ErrGetKeyPair", Message: "secret missing"}}}
	if ok, why := IssuerReady("Issuer a/b", 1, st); ok || !strings.Contains(why, "secret missing") {
		t.Errorf("%v %q", ok, why)
	}
	st.Conditions[0].Status = cmmeta.ConditionTrue
	if ok, _ := IssuerReady("Issuer a/b", 1, st); !ok {
		t.Error("ready issuer reported not ready")
	}
}

func TestIssuedCAMustBeACAWithItsKey(t *testing.T) {
	now := time.Now()
	root, err := pki.NewCA("root", 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := root.IssueServerCert("leaf", []string{"leaf.example.com"}, nil, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	secret := func(cert, key, ca []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: CAIssuedSecretName},
			Data: map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca}}
	}
	if _, _, err := IssuedCA(secret(leaf.CertPEM, leaf.KeyPEM, root.CertPEM)); err == nil || !strings.Contains(err.Error(), "not a CA certificate") {
		t.Errorf("a leaf accepted as the agents' CA: %v", err)
	}
	if _, _, err := IssuedCA(secret(root.CertPEM, leaf.KeyPEM, nil)); err == nil {
		t.Error("a CA with another key accepted")
	}
	// A chain in tls.crt: only the CA itself is kept; ca.crt are the anchors.
	chain := append(append([]byte{}, root.CertPEM...), leaf.CertPEM...)
	kp, anchors, err := IssuedCA(secret(chain, root.KeyPEM, leaf.CertPEM))
	if err != nil {
		t.Fatal(err)
	}
	if string(kp.CertPEM) != string(root.CertPEM) || len(anchors) != 1 || !anchors[0].Equal(leaf.Cert) {
		t.Errorf("key pair or anchors wrong: %d anchors", len(anchors))
	}
}

func TestAnchorsFallBackToTheTopOfTheChain(t *testing.T) {
	now := time.Now()
	root, _ := pki.NewCA("root", 24*time.Hour, now)
	leaf, _ := root.IssueServerCert("leaf", []string{"leaf.example.com"}, nil, time.Hour, now)
	s := &corev1.Secret{Data: map[string][]byte{"tls.crt": append(append([]byte{}, leaf.CertPEM...), root.CertPEM...)}}
	if got := Anchors(s); len(got) != 1 || !got[0].Equal(root.Cert) {
		t.Errorf("anchors without ca.crt: %v", got)
	}
	s.Data["tls.crt"] = leaf.CertPEM
	if got := Anchors(s); len(got) != 0 {
		t.Errorf("a lone leaf is no anchor: %v", got)
	}
}
