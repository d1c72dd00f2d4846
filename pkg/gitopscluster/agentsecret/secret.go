// Package agentsecret reads and names the Argo CD cluster secrets that register agents with the
// principal, and keeps them compact in the manager's cache.
package agentsecret

import (
	"crypto/x509"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// Name is the Argo CD cluster secret that registers an agent with the principal.
func Name(cluster string) string { return "cluster-" + cluster }

type TLSClientConfig struct {
	CertData []byte `json:"certData"`
	KeyData  []byte `json:"keyData"`
	CAData   []byte `json:"caData"`
}

type Config struct {
	TLSClientConfig TLSClientConfig `json:"tlsClientConfig"`
}

// Certificate returns the resource-proxy client certificate of a cluster secret
// as the API server serves it, or nil.
func Certificate(s *corev1.Secret) *x509.Certificate {
	if s == nil {
		return nil
	}
	var cfg Config
	if err := json.Unmarshal(s.Data["config"], &cfg); err != nil {
		return nil
	}
	certs, err := pki.ParseCertificates(cfg.TLSClientConfig.CertData)
	if err != nil || len(certs) == 0 {
		return nil
	}
	return certs[0]
}
