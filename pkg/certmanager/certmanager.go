// Package certmanager builds the cert-manager Certificates of a principal's PKI when a
// GitOpsCluster names a cert-manager issuer, and reads what cert-manager issued: the agents'
// signing CA (an intermediate) and the trust anchors of the serving certificates. It is pure:
// objects in, objects out; the GitOpsCluster reconciler applies them.
package certmanager

import (
	"crypto/x509"
	"fmt"
	"net"
	"slices"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

const (
	// CACertificateName is the Certificate of the agents' signing CA. cert-manager writes it to
	// CAIssuedSecretName; the manager copies it into the principal's CA secret, adding the
	// previous CAs that agents may still hold certificates from.
	CACertificateName  = "argocd-agent-ca"
	CAIssuedSecretName = "argocd-agent-ca-cert-manager"
	// PrincipalIssuedSecretName is where cert-manager writes the principal's serving
	// certificate; the manager copies it into the Secret the principal reads once the agents
	// trust its CA, so a new issuer never cuts agents off.
	PrincipalIssuedSecretName = "argocd-agent-principal-tls-cert-manager"
	// CACommonName is the subject of the agents' signing CA.
	CACommonName = "argocd-agent-ca"
	// AnnotationPKISource on the principal's CA secret says which PKI wrote it; when it says
	// cert-manager and the GitOpsClusters no longer name an issuer, the manager mints its own
	// CA again and keeps the cert-manager one trusted until it expires.
	AnnotationPKISource = "argocd-agent-addon.open-cluster-management.io/pki-source"
	// PKISourceCertManager is the value of AnnotationPKISource for cert-manager.
	PKISourceCertManager = "cert-manager"
	// SelfManagedIssuerName, SelfManagedIssuerKind and SelfManagedIssuerGroup name the
	// manager's own CA in cert-manager's issuer annotations of a serving secret it issued, so
	// that cert-manager re-issues the secret rather than adopt it.
	SelfManagedIssuerName  = "argocd-agent-addon"
	SelfManagedIssuerKind  = "SelfManagedCA"
	SelfManagedIssuerGroup = "argocd-agent-addon.open-cluster-management.io"
	// DefaultIssuerGroup and DefaultIssuerKind are cert-manager's defaults for an issuerRef.
	DefaultIssuerGroup = "cert-manager.io"
	DefaultIssuerKind  = "Issuer"
)

// IssuerRef returns the spec's issuer reference with cert-manager's defaults filled in, so
// two spellings of the same issuer compare equal.
func IssuerRef(in v1alpha1.CertManagerIssuerReference) cmmeta.IssuerReference {
	out := cmmeta.IssuerReference{Name: in.Name, Kind: in.Kind, Group: in.Group}
	if out.Kind == "" {
		out.Kind = DefaultIssuerKind
	}
	if out.Group == "" {
		out.Group = DefaultIssuerGroup
	}
	return out
}

// DescribeIssuer names an issuer for messages: "ClusterIssuer corp-ca" or "Issuer ns/name".
func DescribeIssuer(ns string, ref cmmeta.IssuerReference) string {
	name := ref.Name
	if ref.Kind == DefaultIssuerKind {
		name = ns + "/" + ref.Name
	}
	if ref.Group != DefaultIssuerGroup {
		return fmt.Sprintf("%s.%s %s", ref.Kind, ref.Group, name)
	}
	return ref.Kind + " " + name
}

// CACertificate is the Certificate of the agents' signing CA: an ECDSA P-256 intermediate
// with a new key on every renewal, so a renewed CA is a new trust anchor that overlaps with
// the old one exactly as a self-managed rotation does. cert-manager's default lifetime (90
// days, renewed after two thirds) applies unless the issuer shortens it.
func CACertificate(ns string, ref cmmeta.IssuerReference, labels map[string]string) *cmapi.Certificate {
	c := certificate(ns, CACertificateName, CAIssuedSecretName, ref, labels)
	c.Spec.CommonName = CACommonName
	c.Spec.IsCA = true
	c.Spec.Usages = []cmapi.KeyUsage{cmapi.UsageCertSign, cmapi.UsageCRLSign, cmapi.UsageDigitalSignature}
	return c
}

// ServingCertificate is the Certificate name of a serving certificate written to secretName,
// for the given DNS names and IP addresses.
func ServingCertificate(ns, name, secretName string, dnsNames []string, ips []net.IP, ref cmmeta.IssuerReference, labels map[string]string) *cmapi.Certificate {
	c := certificate(ns, name, secretName, ref, labels)
	c.Spec.DNSNames = slices.Clone(dnsNames)
	for _, ip := range ips {
		c.Spec.IPAddresses = append(c.Spec.IPAddresses, ip.String())
	}
	c.Spec.Usages = []cmapi.KeyUsage{cmapi.UsageServerAuth, cmapi.UsageDigitalSignature, cmapi.UsageKeyEncipherment}
	return c
}

func certificate(ns, name, secretName string, ref cmmeta.IssuerReference, labels map[string]string) *cmapi.Certificate {
	return &cmapi.Certificate{
		TypeMeta:   metav1.TypeMeta{APIVersion: cmapi.SchemeGroupVersion.String(), Kind: cmapi.CertificateKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: cloneMap(labels)},
		Spec: cmapi.CertificateSpec{
			SecretName: secretName,
			// The Secret carries the manager's labels, so the manager knows it as its own
			// (and re-issues it itself when the GitOpsClusters go back to the self-managed CA).
			SecretTemplate: &cmapi.CertificateSecretTemplate{Labels: cloneMap(labels)},
			IssuerRef:      ref,
			PrivateKey: &cmapi.CertificatePrivateKey{
				Algorithm:      cmapi.ECDSAKeyAlgorithm,
				Size:           256,
				Encoding:       cmapi.PKCS1,
				RotationPolicy: cmapi.RotationPolicyAlways,
			},
		},
	}
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// NeedsUpdate tells whether existing differs from desired in what the manager sets: the
// spec and the desired labels. Fields cert-manager or the API server default are left alone.
func NeedsUpdate(existing, desired *cmapi.Certificate) bool {
	for k, v := range desired.Labels {
		if existing.Labels[k] != v {
			return true
		}
	}
	return !equality.Semantic.DeepEqual(existing.Spec, desired.Spec)
}

// Ready reports whether cert-manager has issued c for its current spec, and why not.
func Ready(c *cmapi.Certificate) (bool, string) {
	for _, cond := range c.Status.Conditions {
		if cond.Type != cmapi.CertificateConditionReady {
			continue
		}
		if cond.ObservedGeneration != c.Generation {
			return false, fmt.Sprintf("Certificate %s/%s: cert-manager has not yet processed its latest spec", c.Namespace, c.Name)
		}
		if cond.Status == cmmeta.ConditionTrue {
			return true, ""
		}
		return false, fmt.Sprintf("Certificate %s/%s is not Ready (%s): %s", c.Namespace, c.Name, cond.Reason, cond.Message)
	}
	return false, fmt.Sprintf("Certificate %s/%s has no Ready condition yet; is cert-manager running?", c.Namespace, c.Name)
}

// IssuerReady reports whether an Issuer or ClusterIssuer status says Ready for its current
// generation, and why not.
func IssuerReady(what string, generation int64, status *cmapi.IssuerStatus) (bool, string) {
	if status != nil {
		for _, cond := range status.Conditions {
			if cond.Type != cmapi.IssuerConditionReady {
				continue
			}
			if cond.Status == cmmeta.ConditionTrue && (cond.ObservedGeneration == 0 || cond.ObservedGeneration == generation) {
				return true, ""
			}
			return false, fmt.Sprintf("%s is not Ready (%s): %s", what, cond.Reason, cond.Message)
		}
	}
	return false, fmt.Sprintf("%s has no Ready condition yet; is cert-manager running?", what)
}

// IssuedCA reads the agents' signing CA cert-manager wrote: the key pair (the first
// certificate of tls.crt and tls.key), which must be able to sign client certificates, and
// the certificates above it (the rest of tls.crt and ca.crt), which anchor the serving
// certificates the same issuer signs.
func IssuedCA(s *corev1.Secret) (*pki.KeyPair, []*x509.Certificate, error) {
	kp, err := pki.ParseKeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, nil, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	if !kp.Cert.BasicConstraintsValid || !kp.Cert.IsCA || (kp.Cert.KeyUsage != 0 && kp.Cert.KeyUsage&x509.KeyUsageCertSign == 0) {
		return nil, nil, fmt.Errorf("secret %s/%s: %q is not a CA certificate that may sign certificates; the issuer must be able to issue CA certificates (isCA: true)",
			s.Namespace, s.Name, kp.Cert.Subject.String())
	}
	// Only the agents' CA itself is kept in tls.crt: the principal trusts exactly it (and
	// its predecessors) for client certificates, not the issuer's whole hierarchy.
	kp.CertPEM = pki.EncodeCertificates(kp.Cert)
	return kp, Anchors(s), nil
}

// Anchors returns the certificates that verify the leaf in a cert-manager Secret: ca.crt
// when the issuer fills it in, else the topmost certificate of the tls.crt chain. Agents
// trust only the bundle the manager hands them, so a serving certificate whose anchor is not
// in it cannot be verified.
func Anchors(s *corev1.Secret) []*x509.Certificate {
	if certs, err := pki.ParseCertificates(s.Data[cmmeta.TLSCAKey]); err == nil {
		return certs
	}
	if chain, err := pki.ParseCertificates(s.Data[corev1.TLSCertKey]); err == nil && len(chain) > 1 && chain[len(chain)-1].IsCA {
		return chain[len(chain)-1:]
	}
	return nil
}
