package agentsecret

import (
	"crypto/x509"
	"encoding/json"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// The manager caches the agent cluster secret of every cluster it serves. At 5,000 clusters
// their certificates, private keys and CA bundles were the largest part of its heap, and the
// reconciler only ever needs to know which certificate a secret holds and which bundle it
// trusts. So the cache keeps a compact form of each agent cluster secret: "name" and "server"
// as written and, in place of "config", the certificate's identity (Identity) and the
// CA bundle, one copy shared by every secret that carries the same bundle.
//
// The compact form's data keys are not valid Secret data keys. They can never come from the
// API server, so finding one proves the object came through Compact, and an
// update sent from a cached copy by mistake is refused by the API server instead of wiping
// the secret's credentials.
const (
	compactCertificateKey = "#certificate"
	compactBundleKey      = "#ca-bundle"
)

// Identity is what the reconciler decides a cluster secret's fate with.
type Identity struct {
	// Fingerprint is pki.Fingerprint of the client certificate; empty when the config holds
	// none that parses. It is kept even when the key does not match, so that a certificate
	// that exists is still recorded and revoked.
	Fingerprint string `json:"fingerprint,omitempty"`
	// KeyMatches: the config's private key belongs to the certificate.
	KeyMatches bool      `json:"keyMatches,omitempty"`
	CommonName string    `json:"commonName,omitempty"`
	NotBefore  time.Time `json:"notBefore,omitzero"`
	NotAfter   time.Time `json:"notAfter,omitzero"`
	// Issuer is the fingerprint of the CA certificate of the secret's own bundle whose key
	// signed the client certificate; empty when none did.
	Issuer string `json:"issuer,omitempty"`
	// ClientAuth: the certificate may authenticate a TLS client.
	ClientAuth bool `json:"clientAuth,omitempty"`
}

// Usable reports whether the secret's key pair can authenticate as a client of the CA whose
// fingerprint is given, at now: the key matches, the CA signed the certificate, and it is
// within its lifetime. The hub CA is always in the bundle the reconciler writes, first, so a
// certificate it signed names it as Issuer.
func (c Identity) Usable(caFingerprint string, now time.Time) bool {
	return c.Fingerprint != "" && c.KeyMatches && c.ClientAuth && c.Issuer != "" && c.Issuer == caFingerprint &&
		!now.Before(c.NotBefore) && now.Before(c.NotAfter)
}

// RenewalTime is pki.RenewalTime of the certificate.
func (c Identity) RenewalTime() time.Time {
	return pki.RenewalTimeOf(c.NotBefore, c.NotAfter)
}

// IsAgentClusterSecret: one of the cluster secrets this package writes for agents (the pull
// model's cluster secrets carry no credentials and no agent name).
func IsAgentClusterSecret(s *corev1.Secret) bool {
	return s.Labels[v1alpha1.LabelSecretType] == "cluster" && s.Labels[v1alpha1.LabelAgentName] != ""
}

// Compact is the manager cache's transform for Secrets: it replaces the
// config of an agent cluster secret with its compact form and leaves every other Secret as
// it is.
func Compact(o any) (any, error) {
	s, ok := o.(*corev1.Secret)
	if !ok || !IsAgentClusterSecret(s) {
		return o, nil
	}
	config, ok := s.Data["config"]
	if !ok {
		return o, nil
	}
	cert, bundle := inspectAgentConfig(config)
	summary, err := json.Marshal(cert)
	if err != nil {
		return nil, err
	}
	delete(s.Data, "config")
	s.Data[compactCertificateKey] = summary
	s.Data[compactBundleKey] = bundles.intern(bundle)
	return s, nil
}

// Contents returns the certificate identity and CA bundle of an agent cluster
// secret, whether it is in the compact form of the cache or as the API server serves it.
func Contents(s *corev1.Secret) (Identity, []byte) {
	if s == nil {
		return Identity{}, nil
	}
	if config, ok := s.Data["config"]; ok {
		return inspectAgentConfig(config)
	}
	var cert Identity
	if raw, ok := s.Data[compactCertificateKey]; !ok || json.Unmarshal(raw, &cert) != nil {
		return Identity{}, nil
	}
	return cert, s.Data[compactBundleKey]
}

// inspectAgentConfig reads a cluster secret's config: the identity of its client
// certificate (zero when none parses) and its CA bundle as written.
func inspectAgentConfig(config []byte) (Identity, []byte) {
	var cfg Config
	if err := json.Unmarshal(config, &cfg); err != nil {
		return Identity{}, nil
	}
	bundle := cfg.TLSClientConfig.CAData
	certs, err := pki.ParseCertificates(cfg.TLSClientConfig.CertData)
	if err != nil || len(certs) == 0 {
		return Identity{}, bundle
	}
	leaf := certs[0]
	key, keyErr := pki.ParsePrivateKey(cfg.TLSClientConfig.KeyData)
	// As x509 verification does, a certificate without extended key usages may serve any.
	eku := leaf.ExtKeyUsage
	out := Identity{
		Fingerprint: pki.Fingerprint(leaf),
		KeyMatches:  keyErr == nil && pki.KeyMatches(leaf, key),
		CommonName:  leaf.Subject.CommonName,
		NotBefore:   leaf.NotBefore.UTC(),
		NotAfter:    leaf.NotAfter.UTC(),
		ClientAuth:  len(eku) == 0 || slices.Contains(eku, x509.ExtKeyUsageClientAuth) || slices.Contains(eku, x509.ExtKeyUsageAny),
	}
	cas, _ := pki.ParseCertificates(bundle)
	for _, ca := range cas {
		if ca.IsCA && leaf.CheckSignatureFrom(ca) == nil {
			out.Issuer = pki.Fingerprint(ca)
			break
		}
	}
	return out, bundle
}

// bundleInterner hands out one shared copy of each CA bundle: every agent cluster secret of a
// principal carries the same one. The table is small (a principal has one bundle, two during
// a rotation); past maxBundles it starts over, which only costs sharing.
type bundleInterner struct {
	mu    sync.Mutex
	table map[string][]byte
}

const maxBundles = 256

var bundles bundleInterner

func (b *bundleInterner) intern(bundle []byte) []byte {
	if len(bundle) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if shared, ok := b.table[string(bundle)]; ok {
		return shared
	}
	if b.table == nil || len(b.table) >= maxBundles {
		b.table = map[string][]byte{}
	}
	shared := slices.Clone(bundle)
	b.table[string(shared)] = shared
	return shared
}
