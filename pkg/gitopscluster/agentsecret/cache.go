package agentsecret

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"hash/maphash"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/bounded"
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
	Fingerprint string
	// KeyMatches: the config's private key belongs to the certificate.
	KeyMatches bool
	CommonName string
	NotBefore  time.Time
	NotAfter   time.Time
	// Issuer is the fingerprint of the CA certificate of the secret's own bundle whose key
	// signed the client certificate; empty when none did.
	Issuer string
	// ClientAuth: the certificate may authenticate a TLS client.
	ClientAuth bool
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
	// Only the cache takes what NewVouchedConfig vouched for: the cache sees each written secret
	// once, and a reader of a live secret (Contents) must not take the entry from under it.
	var cert Identity
	var bundle []byte
	if known, ok := vouched.LoadAndDelete(sha256.Sum256(config)); ok {
		cert, bundle = known.identity, known.bundle
	} else {
		cert, bundle = inspectAgentConfig(config)
	}
	delete(s.Data, "config")
	s.Data[compactCertificateKey] = encodeIdentity(cert)
	s.Data[compactBundleKey] = bundle
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
	cert, ok := decodeIdentity(s.Data[compactCertificateKey])
	if !ok {
		return Identity{}, nil
	}
	return cert, s.Data[compactBundleKey]
}

// inspectAgentConfig reads a cluster secret's config: the identity of its client
// certificate (zero when none parses) and its CA bundle, the interned copy.
func inspectAgentConfig(config []byte) (Identity, []byte) {
	var cfg Config
	if err := json.Unmarshal(config, &cfg); err != nil {
		return Identity{}, nil
	}
	bundle := internBundle(cfg.TLSClientConfig.CAData)
	certs, err := pki.ParseCertificates(cfg.TLSClientConfig.CertData)
	if err != nil || len(certs) == 0 {
		return Identity{}, bundle.pem
	}
	return identityOf(certs[0], keyMatches(certs[0], cfg.TLSClientConfig.KeyData), bundle, ""), bundle.pem
}

// identityOf is the identity of leaf, whose key is or is not the one beside it, in a secret
// that trusts bundle. knownIssuer, when set, is the fingerprint of the CA that signed leaf, so
// its signature needs no check.
func identityOf(leaf *x509.Certificate, keyMatches bool, bundle *internedBundle, knownIssuer string) Identity {
	// As x509 verification does, a certificate without extended key usages may serve any.
	eku := leaf.ExtKeyUsage
	out := Identity{
		Fingerprint: pki.Fingerprint(leaf),
		KeyMatches:  keyMatches,
		CommonName:  leaf.Subject.CommonName,
		NotBefore:   leaf.NotBefore.UTC(),
		NotAfter:    leaf.NotAfter.UTC(),
		ClientAuth:  len(eku) == 0 || slices.Contains(eku, x509.ExtKeyUsageClientAuth) || slices.Contains(eku, x509.ExtKeyUsageAny),
	}
	for _, ca := range bundle.authorities {
		if (knownIssuer != "" && ca.fingerprint == knownIssuer) || leaf.CheckSignatureFrom(ca.cert) == nil {
			out.Issuer = ca.fingerprint
			break
		}
	}
	return out
}

func keyMatches(leaf *x509.Certificate, keyPEM []byte) bool {
	key, err := pki.ParsePrivateKey(keyPEM)
	return err == nil && pki.KeyMatches(leaf, key)
}

// NewConfig is the config of an agent cluster secret: kp's certificate and key, and bundle
// as the CAs to trust.
func NewConfig(kp *pki.KeyPair, bundle []byte) ([]byte, error) {
	return json.Marshal(Config{TLSClientConfig: TLSClientConfig{CertData: kp.CertPEM, KeyData: kp.KeyPEM, CAData: bundle}})
}

// NewVouchedConfig is NewConfig for a key pair this process has just issued with ca, for a
// cluster secret it is about to write; it also tells the cache what that config holds. When
// the secret's watch event comes in, the cache transform takes the identity from here instead
// of decoding the config, parsing the certificate and the key and checking the signature,
// which were most of its cost for each of a large fleet's new secrets. It vouches only for
// those exact bytes: a config that differs in any byte is read as one written elsewhere.
// ca must be the CA that signed kp: its signature is taken on trust when ca's name and key id
// are those kp's certificate names as its issuer's (the key ids of this project's CAs are
// derived from their keys), and checked otherwise.
func NewVouchedConfig(kp, ca *pki.KeyPair, bundle []byte) ([]byte, error) {
	config, err := NewConfig(kp, bundle)
	if err != nil {
		return nil, err
	}
	interned := internBundle(bundle)
	signer := ""
	if len(ca.Cert.SubjectKeyId) > 0 && bytes.Equal(kp.Cert.AuthorityKeyId, ca.Cert.SubjectKeyId) && bytes.Equal(kp.Cert.RawIssuer, ca.Cert.RawSubject) {
		signer = pki.Fingerprint(ca.Cert)
	}
	vouched.Store(sha256.Sum256(config), vouchedIdentity{
		identity: identityOf(kp.Cert, kp.Key != nil && pki.KeyMatches(kp.Cert, kp.Key), interned, signer),
		bundle:   interned.pem,
	})
	return config, nil
}

// vouchedIdentity is what the process knows of a config it wrote: the identity its
// certificate reads as, and the interned copy of its bundle.
type vouchedIdentity struct {
	identity Identity
	bundle   []byte
}

// vouched holds each config, by its digest, until the cache has seen it once: a registration
// writes its secrets a few at a time, so only those on their way are held. A config whose
// secret was never written (the write failed) is dropped with the others past maxVouchedHeld;
// dropping one only costs its secret a full read.
var vouched = bounded.NewMap[[sha256.Size]byte, vouchedIdentity](maxVouchedHeld)

const maxVouchedHeld = 4096

// internedBundle is a CA bundle as written and the CA certificates in it (none when any of
// its blocks does not parse).
type internedBundle struct {
	pem         []byte
	authorities []authority
}

type authority struct {
	cert        *x509.Certificate
	fingerprint string
}

// bundles holds one shared copy of each CA bundle, its CA certificates parsed once: every
// agent cluster secret of a principal carries the same one. It is small (a principal has one
// bundle, two during a rotation); past maxBundles it starts over, which only costs sharing.
// It is keyed by a hash of the bundle so that a lookup does not copy the bundle into a
// string; a bundle whose hash is held for another is parsed and not shared.
var bundles = bounded.NewMap[uint64, *internedBundle](maxBundles)

const maxBundles = 256

var (
	bundleSeed = maphash.MakeSeed()
	noBundle   = &internedBundle{}
)

func internBundle(bundle []byte) *internedBundle {
	if len(bundle) == 0 {
		return noBundle
	}
	key := maphash.Bytes(bundleSeed, bundle)
	if shared, ok := bundles.Load(key); ok && bytes.Equal(shared.pem, bundle) {
		return shared
	}
	parsed := &internedBundle{pem: slices.Clone(bundle)}
	cas, _ := pki.ParseCertificates(bundle)
	for _, ca := range cas {
		if ca.IsCA {
			parsed.authorities = append(parsed.authorities, authority{cert: ca, fingerprint: pki.Fingerprint(ca)})
		}
	}
	if shared := bundles.LoadOrStore(key, parsed); bytes.Equal(shared.pem, bundle) {
		return shared
	}
	return parsed
}
