/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"net"
	"regexp"
	"slices"
	"testing"
	"time"
)

func TestIssueServerCert(t *testing.T) {
	ca := mustCA(t, 365*24*time.Hour)
	for _, tc := range []struct {
		name     string
		dns      []string
		ips      []net.IP
		wantDNS  []string
		wantIPs  []string
		validity time.Duration
		wantEnd  time.Time
	}{
		{
			name:     "principal with service names and IPs",
			dns:      []string{"argocd-agent-principal.argocd.svc", "argocd-agent-principal", "principal.example.com"},
			ips:      []net.IP{net.ParseIP("10.0.0.7"), net.ParseIP("::1")},
			wantDNS:  []string{"argocd-agent-principal", "argocd-agent-principal.argocd.svc", "principal.example.com"},
			wantIPs:  []string{"10.0.0.7", "::1"},
			validity: 90 * 24 * time.Hour,
			wantEnd:  t0.Add(90 * 24 * time.Hour),
		},
		{
			name:     "duplicates, case and IPv4 spellings collapse",
			dns:      []string{"B.example", "a.example", "b.example", "a.example"},
			ips:      []net.IP{net.ParseIP("192.168.1.1"), net.IPv4(192, 168, 1, 1).To4(), net.ParseIP("127.0.0.1")},
			wantDNS:  []string{"a.example", "b.example"},
			wantIPs:  []string{"127.0.0.1", "192.168.1.1"},
			validity: time.Hour,
			wantEnd:  t0.Add(time.Hour),
		},
		{
			name:     "IP only, NotAfter clamped to the CA",
			ips:      []net.IP{net.ParseIP("172.18.0.2")},
			wantIPs:  []string{"172.18.0.2"},
			validity: 5 * 365 * 24 * time.Hour,
			wantEnd:  ca.Cert.NotAfter,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := ca.IssueServerCert("argocd-agent-principal", tc.dns, tc.ips, tc.validity, t0)
			if err != nil {
				t.Fatalf("IssueServerCert: %v", err)
			}
			c := kp.Cert
			if c.Subject.CommonName != "argocd-agent-principal" {
				t.Errorf("CN = %q", c.Subject.CommonName)
			}
			if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
				t.Errorf("ExtKeyUsage = %v, want [ServerAuth]", c.ExtKeyUsage)
			}
			if c.KeyUsage != x509.KeyUsageDigitalSignature {
				t.Errorf("KeyUsage = %b, want DigitalSignature", c.KeyUsage)
			}
			if c.IsCA || !c.BasicConstraintsValid {
				t.Errorf("IsCA=%v BasicConstraintsValid=%v, want false/true", c.IsCA, c.BasicConstraintsValid)
			}
			if !slices.Equal(c.DNSNames, tc.wantDNS) {
				t.Errorf("DNSNames = %q, want %q", c.DNSNames, tc.wantDNS)
			}
			var gotIPs []string
			for _, ip := range c.IPAddresses {
				gotIPs = append(gotIPs, ip.String())
			}
			if !slices.Equal(gotIPs, tc.wantIPs) {
				t.Errorf("IPAddresses = %q, want %q", gotIPs, tc.wantIPs)
			}
			if !SANsMatch(c, tc.dns, tc.ips) {
				t.Error("SANsMatch(cert, requested SANs) = false")
			}
			if !c.NotAfter.Equal(tc.wantEnd) || c.NotAfter.After(ca.Cert.NotAfter) {
				t.Errorf("NotAfter = %v, want %v (CA until %v)", c.NotAfter, tc.wantEnd, ca.Cert.NotAfter)
			}
			if !c.NotBefore.Equal(t0.Add(-ClockSkewAllowance)) {
				t.Errorf("NotBefore = %v, want %v", c.NotBefore, t0.Add(-ClockSkewAllowance))
			}
			if !bytes.Equal(c.AuthorityKeyId, ca.Cert.SubjectKeyId) || len(c.SubjectKeyId) == 0 {
				t.Errorf("AuthorityKeyId = %x, want CA's %x; SubjectKeyId %x", c.AuthorityKeyId, ca.Cert.SubjectKeyId, c.SubjectKeyId)
			}
			if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
				t.Errorf("public key %T, want ECDSA P-256", c.PublicKey)
			}
			if !publicKeysEqual(c.PublicKey, kp.Key.Public()) || publicKeysEqual(c.PublicKey, ca.Key.Public()) {
				t.Error("leaf key must be its own fresh key")
			}
			roots := []*x509.Certificate{ca.Cert}
			if err := VerifyChain(c, roots, x509.ExtKeyUsageServerAuth, t0); err != nil {
				t.Errorf("chain does not verify for ServerAuth: %v", err)
			}
			if err := VerifyChain(c, roots, x509.ExtKeyUsageClientAuth, t0); err == nil {
				t.Error("server certificate verifies for ClientAuth")
			}
			for _, name := range tc.wantDNS {
				if err := c.VerifyHostname(name); err != nil {
					t.Errorf("VerifyHostname(%q): %v", name, err)
				}
			}
			for _, ip := range tc.wantIPs {
				if err := c.VerifyHostname(ip); err != nil {
					t.Errorf("VerifyHostname(%q): %v", ip, err)
				}
			}
			if _, err := ParseKeyPair(kp.CertPEM, kp.KeyPEM); err != nil {
				t.Errorf("PEM forms do not round-trip: %v", err)
			}
		})
	}
}

func TestIssueServerCertDeterministicSANs(t *testing.T) {
	ca := mustCA(t, 24*time.Hour)
	dns := []string{"c.example", "a.example", "b.example"}
	ips := []net.IP{net.ParseIP("10.0.0.2"), net.ParseIP("fd00::1"), net.ParseIP("10.0.0.1")}
	a, err := ca.IssueServerCert("p", dns, ips, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(dns)
	slices.Reverse(ips)
	b, err := ca.IssueServerCert("p", dns, ips, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Cert.DNSNames, b.Cert.DNSNames) || !slices.EqualFunc(a.Cert.IPAddresses, b.Cert.IPAddresses, net.IP.Equal) {
		t.Errorf("SAN order depends on input order: %q %v vs %q %v", a.Cert.DNSNames, a.Cert.IPAddresses, b.Cert.DNSNames, b.Cert.IPAddresses)
	}
	sanExt := func(c *x509.Certificate) []byte {
		for _, e := range c.Extensions {
			if e.Id.Equal(asn1.ObjectIdentifier{2, 5, 29, 17}) {
				return e.Value
			}
		}
		return nil
	}
	if ea, eb := sanExt(a.Cert), sanExt(b.Cert); ea == nil || !bytes.Equal(ea, eb) {
		t.Error("SAN extensions differ for the same SAN set")
	}
}

func TestIssueServerCertErrors(t *testing.T) {
	ca := mustCA(t, 24*time.Hour)
	leaf, err := ca.IssueServerCert("leaf", []string{"leaf"}, nil, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	other := mustCA(t, 24*time.Hour)
	mismatched := &KeyPair{Cert: ca.Cert, Key: other.Key}
	for _, tc := range []struct {
		name    string
		ca      *KeyPair
		dns     []string
		ips     []net.IP
		valid   time.Duration
		now     time.Time
		wantErr error
	}{
		{name: "no SANs", ca: ca, valid: time.Hour, now: t0},
		{name: "empty DNS name", ca: ca, dns: []string{"ok", ""}, valid: time.Hour, now: t0},
		{name: "invalid IP", ca: ca, ips: []net.IP{{1, 2, 3}}, valid: time.Hour, now: t0},
		{name: "zero validity", ca: ca, dns: []string{"x"}, valid: 0, now: t0},
		{name: "CA expired", ca: ca, dns: []string{"x"}, valid: time.Hour, now: ca.Cert.NotAfter.Add(time.Second), wantErr: ErrCAExpired},
		{name: "issuer is not a CA", ca: leaf, dns: []string{"x"}, valid: time.Hour, now: t0, wantErr: ErrNotCA},
		{name: "CA key does not match", ca: mismatched, dns: []string{"x"}, valid: time.Hour, now: t0, wantErr: ErrKeyMismatch},
		{name: "nil CA", ca: nil, dns: []string{"x"}, valid: time.Hour, now: t0, wantErr: ErrNotCA},
		{name: "CA without key", ca: &KeyPair{Cert: ca.Cert}, dns: []string{"x"}, valid: time.Hour, now: t0, wantErr: ErrNotCA},
		{name: "before the CA's validity", ca: ca, dns: []string{"x"}, valid: time.Minute, now: t0.Add(-time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := tc.ca.IssueServerCert("x", tc.dns, tc.ips, tc.valid, tc.now)
			if err == nil {
				t.Fatalf("issued %v, want error", kp.Cert.Subject)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestIssueClientCert(t *testing.T) {
	ca := mustCA(t, 365*24*time.Hour)
	kp, err := ca.IssueClientCert(pkix.Name{CommonName: "cluster1"}, 30*24*time.Hour, t0)
	if err != nil {
		t.Fatalf("IssueClientCert: %v", err)
	}
	c := kp.Cert
	if c.Subject.String() != "CN=cluster1" {
		t.Errorf("subject %q, want CN=cluster1", c.Subject.String())
	}
	if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("ExtKeyUsage = %v, want [ClientAuth]", c.ExtKeyUsage)
	}
	if c.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("KeyUsage = %b, want DigitalSignature", c.KeyUsage)
	}
	if c.IsCA || !c.BasicConstraintsValid || len(c.DNSNames) != 0 || len(c.IPAddresses) != 0 {
		t.Errorf("IsCA=%v BasicConstraintsValid=%v SANs=%v %v", c.IsCA, c.BasicConstraintsValid, c.DNSNames, c.IPAddresses)
	}
	if !c.NotAfter.Equal(t0.Add(30 * 24 * time.Hour)) {
		t.Errorf("NotAfter = %v", c.NotAfter)
	}
	if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() || !pub.Equal(kp.Key.Public()) {
		t.Errorf("public key %T does not match a fresh ECDSA P-256 key", c.PublicKey)
	}
	roots := []*x509.Certificate{ca.Cert}
	if err := VerifyChain(c, roots, x509.ExtKeyUsageClientAuth, t0); err != nil {
		t.Errorf("chain does not verify for ClientAuth: %v", err)
	}
	if err := VerifyChain(c, roots, x509.ExtKeyUsageServerAuth, t0); err == nil {
		t.Error("client certificate verifies for ServerAuth")
	}
	if _, err := ParseKeyPair(kp.CertPEM, kp.KeyPEM); err != nil {
		t.Errorf("PEM forms do not round-trip: %v", err)
	}
	if _, err := ca.IssueClientCert(pkix.Name{}, time.Hour, t0); err == nil {
		t.Error("empty subject accepted")
	}
}

func TestSignClientCertificate(t *testing.T) {
	const validity = 24 * time.Hour
	cas := map[string]*KeyPair{
		"ECDSA CA": mustCA(t, 365*24*time.Hour),
		"RSA CA":   mustRSACA(t, 365*24*time.Hour),
	}
	keys := map[string]crypto.Signer{
		"RSA-2048":  rsaKeyA(),
		"ECDSA-256": genECDSA(t),
		"Ed25519":   genEd25519(t),
	}
	subject := ocmSubject("cluster1")
	if len(subject.CommonName) <= 64 || len(subject.Organization[0]) <= 64 {
		t.Fatal("test subject must exceed the 64-character X.520 bound")
	}
	dnsNames := []string{"argocd-agent-addon.addon.open-cluster-management.io"}
	authRE := regexp.MustCompile(`CN=system:open-cluster-management:cluster:([^:]+):addon:argocd-agent-addon:agent:argocd-agent-addon-agent`)

	for caName, ca := range cas {
		for keyName, key := range keys {
			t.Run(caName+"/"+keyName, func(t *testing.T) {
				csr := csrFor(t, key, subject, dnsNames)
				certPEM, c, err := ca.SignClientCertificate(csr.PublicKey, csr.Subject, csr.DNSNames, validity, t0)
				if err != nil {
					t.Fatalf("SignClientCertificate: %v", err)
				}
				// The subject is exactly the requested one, byte for byte.
				if !bytes.Equal(c.RawSubject, csr.RawSubject) {
					t.Errorf("RawSubject differs from the CSR's\n got %q\nwant %q", c.Subject.String(), csr.Subject.String())
				}
				// Same values in the order the CSR carries them (DER sorts a multi-valued RDN).
				if c.Subject.CommonName != subject.CommonName ||
					!slices.Equal(c.Subject.Organization, csr.Subject.Organization) ||
					!slices.Equal(c.Subject.OrganizationalUnit, csr.Subject.OrganizationalUnit) ||
					!slices.Equal(slices.Sorted(slices.Values(c.Subject.Organization)), slices.Sorted(slices.Values(subject.Organization))) ||
					!slices.Equal(slices.Sorted(slices.Values(c.Subject.OrganizationalUnit)), slices.Sorted(slices.Values(subject.OrganizationalUnit))) {
					t.Errorf("subject %q, want %q", c.Subject.String(), csr.Subject.String())
				}
				if c.Subject.String() != csr.Subject.String() {
					t.Errorf("Subject.String() = %q, want %q", c.Subject.String(), csr.Subject.String())
				}
				if m := authRE.FindStringSubmatch(c.Subject.String()); m == nil || m[1] != "cluster1" {
					t.Errorf("argocd-agent auth regex on %q gave %q, want agent cluster1", c.Subject.String(), m)
				}
				if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
					t.Errorf("ExtKeyUsage = %v, want [ClientAuth]", c.ExtKeyUsage)
				}
				wantKU := x509.KeyUsageDigitalSignature
				if _, isRSA := key.(*rsa.PrivateKey); isRSA {
					wantKU |= x509.KeyUsageKeyEncipherment
				}
				if c.KeyUsage != wantKU {
					t.Errorf("KeyUsage = %b, want %b", c.KeyUsage, wantKU)
				}
				if c.IsCA || !c.BasicConstraintsValid {
					t.Errorf("IsCA=%v BasicConstraintsValid=%v, want false/true", c.IsCA, c.BasicConstraintsValid)
				}
				if !slices.Equal(c.DNSNames, dnsNames) {
					t.Errorf("DNSNames = %q, want %q", c.DNSNames, dnsNames)
				}
				if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
					t.Errorf("serial %v: want positive, at most 128 bits", c.SerialNumber)
				}
				if !c.NotAfter.Equal(t0.Add(validity)) || !c.NotBefore.Equal(t0.Add(-ClockSkewAllowance)) {
					t.Errorf("validity %v..%v, want %v..%v", c.NotBefore, c.NotAfter, t0.Add(-ClockSkewAllowance), t0.Add(validity))
				}
				if !publicKeysEqual(c.PublicKey, key.Public()) {
					t.Error("certificate does not carry the requested public key")
				}
				if !bytes.Equal(c.AuthorityKeyId, ca.Cert.SubjectKeyId) {
					t.Errorf("AuthorityKeyId %x, want %x", c.AuthorityKeyId, ca.Cert.SubjectKeyId)
				}
				if err := c.CheckSignatureFrom(ca.Cert); err != nil {
					t.Errorf("not signed by the CA: %v", err)
				}
				if err := VerifyChain(c, []*x509.Certificate{ca.Cert}, x509.ExtKeyUsageClientAuth, t0); err != nil {
					t.Errorf("chain does not verify: %v", err)
				}
				parsed, err := ParseCertificates(certPEM)
				if err != nil || len(parsed) != 1 || !parsed[0].Equal(c) {
					t.Errorf("returned PEM does not hold the returned certificate (%v)", err)
				}
			})
		}
	}
}

func TestSignClientCertificateClampsToCA(t *testing.T) {
	ca := mustCA(t, 48*time.Hour)
	now := t0.Add(40 * time.Hour)
	_, c, err := ca.SignClientCertificate(genECDSA(t).Public(), pkix.Name{CommonName: "a"}, nil, 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if !c.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("NotAfter = %v, want the CA's %v", c.NotAfter, ca.Cert.NotAfter)
	}
}

func TestSignClientCertificateSubjectOrder(t *testing.T) {
	ca := mustCA(t, 24*time.Hour)
	key := genECDSA(t)
	oidUID := asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	oidCN := asn1.ObjectIdentifier{2, 5, 4, 3}
	oidO := asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOU := asn1.ObjectIdentifier{2, 5, 4, 11}

	t.Run("CSR attribute order and extra attributes are kept", func(t *testing.T) {
		// CN first and a UID last: not the order x509 would write typed fields in.
		subject := pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{
			{Type: oidCN, Value: "system:open-cluster-management:cluster:c1:addon:argocd-agent-addon:agent:argocd-agent-addon-agent"},
			{Type: oidOU, Value: "team-b"},
			{Type: oidO, Value: "system:open-cluster-management:cluster:c1:addon:argocd-agent-addon"},
			{Type: oidOU, Value: "team-a"},
			{Type: oidO, Value: "system:open-cluster-management:addon:argocd-agent-addon"},
			{Type: oidUID, Value: "c1"},
		}}
		csr := csrFor(t, key, subject, nil)
		_, c, err := ca.SignClientCertificate(csr.PublicKey, csr.Subject, nil, time.Hour, t0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c.RawSubject, csr.RawSubject) {
			t.Errorf("subject changed:\n got %s\nwant %s", c.Subject.String(), csr.Subject.String())
		}
		if c.Subject.String() != csr.Subject.String() {
			t.Errorf("Subject.String() = %q, want %q", c.Subject.String(), csr.Subject.String())
		}
	})

	t.Run("edited typed fields win over stale Names", func(t *testing.T) {
		csr := csrFor(t, key, pkix.Name{CommonName: "old", Organization: []string{"g"}}, nil)
		subject := csr.Subject
		subject.CommonName = "new"
		_, c, err := ca.SignClientCertificate(csr.PublicKey, subject, nil, time.Hour, t0)
		if err != nil {
			t.Fatal(err)
		}
		if c.Subject.CommonName != "new" || !slices.Equal(c.Subject.Organization, []string{"g"}) {
			t.Errorf("subject %q, want CN=new,O=g", c.Subject.String())
		}
	})

	t.Run("hand-built subject is written as x509 writes it in a CSR", func(t *testing.T) {
		subject := ocmSubject("c2")
		_, c, err := ca.SignClientCertificate(key.Public(), subject, nil, time.Hour, t0)
		if err != nil {
			t.Fatal(err)
		}
		csr := csrFor(t, key, subject, nil)
		if !bytes.Equal(c.RawSubject, csr.RawSubject) {
			t.Errorf("subject %q, want %q", c.Subject.String(), csr.Subject.String())
		}
	})
}

func TestSignClientCertificateErrors(t *testing.T) {
	ca := mustCA(t, 24*time.Hour)
	leaf, err := ca.IssueClientCert(pkix.Name{CommonName: "leaf"}, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	// A CA certificate whose key usage forbids certificate signing.
	noSignTmpl := *ca.Cert
	noSignTmpl.KeyUsage = x509.KeyUsageDigitalSignature
	noSign := &KeyPair{Cert: &noSignTmpl, Key: ca.Key}

	smallRSA := &rsa.PublicKey{N: new(big.Int).Lsh(big.NewInt(1), 1023), E: 65537}
	subj := pkix.Name{CommonName: "agent"}
	pub := genECDSA(t).Public()
	for _, tc := range []struct {
		name    string
		ca      *KeyPair
		pub     crypto.PublicKey
		subject pkix.Name
		dns     []string
		valid   time.Duration
		now     time.Time
		wantErr error
	}{
		{name: "CA expired", ca: ca, pub: pub, subject: subj, valid: time.Hour, now: ca.Cert.NotAfter.Add(time.Second), wantErr: ErrCAExpired},
		{name: "issuer is not a CA", ca: leaf, pub: pub, subject: subj, valid: time.Hour, now: t0, wantErr: ErrNotCA},
		{name: "CA lacks certSign", ca: noSign, pub: pub, subject: subj, valid: time.Hour, now: t0, wantErr: ErrNotCA},
		{name: "CA without key", ca: &KeyPair{Cert: ca.Cert}, pub: pub, subject: subj, valid: time.Hour, now: t0, wantErr: ErrNotCA},
		{name: "RSA key below 2048 bits", ca: ca, pub: smallRSA, subject: subj, valid: time.Hour, now: t0},
		{name: "nil public key", ca: ca, pub: nil, subject: subj, valid: time.Hour, now: t0},
		{name: "unsupported key type", ca: ca, pub: "not a key", subject: subj, valid: time.Hour, now: t0},
		{name: "bad Ed25519 key", ca: ca, pub: ed25519.PublicKey{1, 2, 3}, subject: subj, valid: time.Hour, now: t0},
		{name: "empty subject", ca: ca, pub: pub, subject: pkix.Name{}, valid: time.Hour, now: t0},
		{name: "empty DNS name", ca: ca, pub: pub, subject: subj, dns: []string{""}, valid: time.Hour, now: t0},
		{name: "negative validity", ca: ca, pub: pub, subject: subj, valid: -time.Hour, now: t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, c, err := tc.ca.SignClientCertificate(tc.pub, tc.subject, tc.dns, tc.valid, tc.now)
			if err == nil {
				t.Fatalf("signed %v, want error", c.Subject)
			}
			if certPEM != nil || c != nil {
				t.Error("returned a certificate together with an error")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestSerialsAreUnique(t *testing.T) {
	seen := make(map[string]bool)
	for range 20000 {
		n, err := newSerial()
		if err != nil {
			t.Fatal(err)
		}
		if n.Sign() <= 0 || n.BitLen() > 128 {
			t.Fatalf("serial %v: want positive and at most 128 bits", n)
		}
		if seen[n.String()] {
			t.Fatalf("serial %v repeated", n)
		}
		seen[n.String()] = true
	}
	// And through the issuing path.
	ca := mustCA(t, time.Hour)
	pub := genECDSA(t).Public()
	issued := map[string]bool{ca.Cert.SerialNumber.String(): true}
	for i := range 200 {
		_, c, err := ca.SignClientCertificate(pub, pkix.Name{CommonName: "agent"}, nil, time.Minute, t0)
		if err != nil {
			t.Fatal(err)
		}
		if issued[c.SerialNumber.String()] {
			t.Fatalf("certificate %d repeats serial %v", i, c.SerialNumber)
		}
		issued[c.SerialNumber.String()] = true
	}
}
