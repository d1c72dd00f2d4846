package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
)

// AgentCSR builds the CertificateSigningRequest OCM's registration agent makes for an addon's
// CustomSigner registration: an ECDSA P-256 key, OCM's default subject for identity, the addon
// DNS name, and the labels of labelCluster (equal to identity unless a test forges one). Go's
// crypto/x509 builds it because OCM's subject values are longer than openssl allows.
func AgentCSR(identity, labelCluster, addonName, signerName string) (*certificatesv1.CertificateSigningRequest, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: signer.DefaultAgentUser(identity, addonName), Organization: signer.DefaultAgentGroups(identity, addonName)},
		DNSNames: []string{signer.AddonDNSName(addonName)},
	}, key)
	if err != nil {
		return nil, err
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: fmt.Sprintf("addon-%s-%s-", labelCluster, addonName),
			Labels:       map[string]string{signer.ClusterNameLabel: labelCluster, signer.AddonNameLabel: addonName},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth},
		},
	}, nil
}
