package agentsecret

import (
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

func agentSecretFor(t testing.TB, cluster string, certPEM, keyPEM, bundle []byte) *corev1.Secret {
	t.Helper()
	config, err := json.Marshal(Config{TLSClientConfig: TLSClientConfig{CertData: certPEM, KeyData: keyPEM, CAData: bundle}})
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: Name(cluster),
			Labels: map[string]string{v1alpha1.LabelSecretType: "cluster", v1alpha1.LabelAgentName: cluster}},
		Data: map[string][]byte{"name": []byte(cluster), "server": []byte("https://proxy"), "config": config},
	}
}

// caAndClient makes a CA and a client certificate for cluster c1 it signed.
func caAndClient(tb testing.TB, name string, now time.Time) (*pki.KeyPair, *pki.KeyPair) {
	tb.Helper()
	ca, err := pki.NewCA(name, 24*time.Hour, now)
	if err != nil {
		tb.Fatal(err)
	}
	kp, err := ca.IssueClientCert(pkix.Name{CommonName: "c1"}, time.Hour, now)
	if err != nil {
		tb.Fatal(err)
	}
	return ca, kp
}

func compacted(t *testing.T, s *corev1.Secret) *corev1.Secret {
	t.Helper()
	out, err := Compact(s.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Secret)
}

func TestCompactAgentClusterSecret(t *testing.T) {
	now := time.Now()
	ca, kp := caAndClient(t, "hub", now)
	other, foreign := caAndClient(t, "other", now)
	bundle := pki.EncodeCertificates(ca.Cert, other.Cert)
	caFP := pki.Fingerprint(ca.Cert)

	t.Run("the compact form reads as the secret does", func(t *testing.T) {
		full := agentSecretFor(t, "c1", kp.CertPEM, kp.KeyPEM, bundle)
		small := compacted(t, full)
		if _, ok := small.Data["config"]; ok {
			t.Fatal("the compact form keeps the config")
		}
		fromFull, fullBundle := Contents(full)
		fromSmall, smallBundle := Contents(small)
		if fromFull != fromSmall || string(fullBundle) != string(smallBundle) {
			t.Fatalf("full %+v, compact %+v", fromFull, fromSmall)
		}
		if fromSmall.Fingerprint != pki.Fingerprint(kp.Cert) || fromSmall.CommonName != "c1" || fromSmall.Issuer != caFP || !fromSmall.ClientAuth {
			t.Fatalf("compact form %+v does not describe the certificate", fromSmall)
		}
		if !fromSmall.Usable(caFP, now) || fromSmall.Usable(caFP, kp.Cert.NotAfter) || fromSmall.Usable(pki.Fingerprint(other.Cert), now) {
			t.Error("usable() does not follow the signer and the lifetime")
		}
		if got, want := fromSmall.RenewalTime(), pki.RenewalTime(kp.Cert); !got.Equal(want) {
			t.Errorf("renewal time %s, want %s", got, want)
		}
	})

	t.Run("a key that does not match its certificate is not usable, but the certificate is named", func(t *testing.T) {
		got, _ := Contents(compacted(t, agentSecretFor(t, "c1", kp.CertPEM, foreign.KeyPEM, bundle)))
		if got.Fingerprint != pki.Fingerprint(kp.Cert) || got.KeyMatches || got.Usable(caFP, now) {
			t.Errorf("mismatched pair reads as %+v", got)
		}
	})

	t.Run("a certificate no CA of the bundle signed has no issuer", func(t *testing.T) {
		got, _ := Contents(compacted(t, agentSecretFor(t, "c1", foreign.CertPEM, foreign.KeyPEM, ca.CertPEM)))
		if got.Fingerprint == "" || got.Issuer != "" {
			t.Errorf("foreign certificate reads as %+v", got)
		}
	})

	t.Run("equal bundles share one copy", func(t *testing.T) {
		a, b := internBundle(bundle), internBundle([]byte(string(bundle)))
		if string(a.pem) != string(bundle) || &a.pem[0] != &b.pem[0] {
			t.Error("each equal bundle gets its own copy")
		}
		if len(a.authorities) != 2 || a.authorities[0].fingerprint != caFP || a.authorities[1].fingerprint != pki.Fingerprint(other.Cert) {
			t.Errorf("the bundle's authorities are %+v, want hub then other", a.authorities)
		}
		if c := internBundle(ca.CertPEM); &c.pem[0] == &a.pem[0] {
			t.Error("a different bundle reads as the shared one")
		}
	})

	t.Run("other secrets are left as they are", func(t *testing.T) {
		pull := agentSecretFor(t, "c1", kp.CertPEM, kp.KeyPEM, bundle)
		delete(pull.Labels, v1alpha1.LabelAgentName)
		if got := compacted(t, pull); string(got.Data["config"]) != string(pull.Data["config"]) || len(got.Data) != 3 {
			t.Errorf("a cluster secret without an agent name was changed: %v", got.Data)
		}
	})
}

// TestIssuedHereReadsTheSame: the config of a certificate this process issued (NewVouchedConfig)
// is read by the cache as one written elsewhere is, whatever bundle it trusts; the shortcut
// only skips the work whose answer it knows.
func TestIssuedHereReadsTheSame(t *testing.T) {
	now := time.Now()
	ca, kp := caAndClient(t, "hub", now)
	other, foreign := caAndClient(t, "other", now)
	namesake, _ := caAndClient(t, "hub", now)
	secretOf := func(t *testing.T, config []byte) *corev1.Secret {
		s := agentSecretFor(t, "c1", nil, nil, nil)
		s.Data["config"] = config
		return s
	}
	for name, tc := range map[string]struct {
		signer *pki.KeyPair
		bundle []byte
	}{
		"the issuer first in the bundle":  {ca, pki.EncodeCertificates(ca.Cert, other.Cert)},
		"the issuer second in the bundle": {ca, pki.EncodeCertificates(other.Cert, ca.Cert)},
		"the issuer not in the bundle":    {ca, other.CertPEM},
		"no bundle":                       {ca, nil},
		"another CA named as the signer":  {other, pki.EncodeCertificates(other.Cert, ca.Cert)},
		"another CA of the signer's name": {namesake, pki.EncodeCertificates(namesake.Cert, ca.Cert)},
	} {
		t.Run(name, func(t *testing.T) {
			config, err := NewVouchedConfig(kp, tc.signer, tc.bundle)
			if err != nil {
				t.Fatal(err)
			}
			s := secretOf(t, config)
			here, hereBundle := Contents(compacted(t, s))
			if _, held := vouched.Load(sha256.Sum256(config)); held {
				t.Error("the config is still held after the cache saw it")
			}
			elsewhere, elsewhereBundle := Contents(compacted(t, s))
			if here != elsewhere || string(hereBundle) != string(elsewhereBundle) {
				t.Errorf("issued here reads as %+v, written elsewhere as %+v", here, elsewhere)
			}
		})
	}

	t.Run("it vouches for no other config", func(t *testing.T) {
		config, err := NewVouchedConfig(kp, ca, ca.CertPEM)
		if err != nil {
			t.Fatal(err)
		}
		defer vouched.LoadAndDelete(sha256.Sum256(config))
		got, _ := Contents(compacted(t, agentSecretFor(t, "c1", kp.CertPEM, foreign.KeyPEM, ca.CertPEM)))
		if got.KeyMatches || got.Fingerprint != pki.Fingerprint(kp.Cert) {
			t.Errorf("the certificate beside another key reads as %+v", got)
		}
		got, _ = Contents(compacted(t, agentSecretFor(t, "c1", foreign.CertPEM, foreign.KeyPEM, ca.CertPEM)))
		if got.Issuer != "" || !got.KeyMatches || got.Fingerprint != pki.Fingerprint(foreign.Cert) {
			t.Errorf("a certificate the hub CA did not sign reads as %+v", got)
		}
	})

	t.Run("a reader of the live secret leaves it to the cache", func(t *testing.T) {
		config, err := NewVouchedConfig(kp, ca, ca.CertPEM)
		if err != nil {
			t.Fatal(err)
		}
		defer vouched.LoadAndDelete(sha256.Sum256(config))
		if got, _ := Contents(secretOf(t, config)); got.Issuer != pki.Fingerprint(ca.Cert) || !got.KeyMatches {
			t.Errorf("the live secret reads as %+v", got)
		}
		if _, held := vouched.Load(sha256.Sum256(config)); !held {
			t.Error("reading the live secret took the config the cache has not seen yet")
		}
	})
}

// BenchmarkCompactAgentClusterSecret is the cache's cost per agent cluster secret event: for a
// secret written elsewhere (or read again), and for one whose config the process has just
// written. The second includes NewVouchedConfig, the writer's share: the config's encoding
// (which any writer pays, see "config") and telling the cache what it holds.
func BenchmarkCompactAgentClusterSecret(b *testing.B) {
	ca, kp := caAndClient(b, "hub", time.Now())
	written := agentSecretFor(b, "c1", kp.CertPEM, kp.KeyPEM, ca.CertPEM)
	b.Run("written-elsewhere", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			// Compact rewrites the secret's data: each event brings a map of its own.
			s := &corev1.Secret{ObjectMeta: written.ObjectMeta, Data: maps.Clone(written.Data)}
			if _, err := Compact(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("issued-here", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			config, err := NewVouchedConfig(kp, ca, ca.CertPEM)
			if err != nil {
				b.Fatal(err)
			}
			s := &corev1.Secret{ObjectMeta: written.ObjectMeta, Data: maps.Clone(written.Data)}
			s.Data["config"] = config
			if _, err := Compact(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("config", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := NewConfig(kp, ca.CertPEM); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkContentsOfCompactSecret is what a pass pays per cached agent cluster secret to read
// its identity.
func BenchmarkContentsOfCompactSecret(b *testing.B) {
	ca, kp := caAndClient(b, "hub", time.Now())
	o, err := Compact(agentSecretFor(b, "c1", kp.CertPEM, kp.KeyPEM, ca.CertPEM))
	if err != nil {
		b.Fatal(err)
	}
	s := o.(*corev1.Secret)
	b.ReportAllocs()
	b.ReportMetric(float64(len(s.Data[compactCertificateKey])), "compact-bytes")
	for b.Loop() {
		if cert, _ := Contents(s); cert.Fingerprint == "" {
			b.Fatal("no identity")
		}
	}
}

func TestIdentityEncoding(t *testing.T) {
	now := time.Now()
	for name, c := range map[string]Identity{
		"zero": {},
		"full": {Fingerprint: strings.Repeat("A", 64), Issuer: strings.Repeat("B", 64), CommonName: "cluster-1", KeyMatches: true, ClientAuth: true,
			NotBefore: now.Add(-time.Hour).UTC(), NotAfter: now.Add(time.Hour).UTC()},
		"a certificate without a key or client auth": {Fingerprint: strings.Repeat("C", 64), NotBefore: time.Unix(0, 5).UTC(), NotAfter: time.Unix(1, 0).UTC()},
		"before 1970":       {CommonName: "old", NotBefore: time.Date(1950, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)},
		"at the Unix epoch": {CommonName: "epoch", NotBefore: time.Unix(0, 0).UTC(), NotAfter: time.Unix(0, 0).UTC()},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := decodeIdentity(encodeIdentity(c))
			if !ok || !reflect.DeepEqual(got, c) {
				t.Errorf("decoded %+v (ok %v), want %+v", got, ok, c)
			}
		})
	}
	full := encodeIdentity(Identity{Fingerprint: strings.Repeat("A", 64), CommonName: "c"})
	for name, b := range map[string][]byte{
		"empty":         nil,
		"other version": append([]byte{identityVersion + 1}, full[1:]...),
		"cut short":     full[:len(full)-1],
		"trailing data": append(slices.Clone(full), 0),
		"header only":   full[:identityHeader],
	} {
		if got, ok := decodeIdentity(b); ok || got != (Identity{}) {
			t.Errorf("%s: decoded %+v, want nothing", name, got)
		}
	}
}
