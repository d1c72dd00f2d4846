/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

func TestNewCA(t *testing.T) {
	const validity = 10 * 365 * 24 * time.Hour
	ca := mustCA(t, validity)
	c := ca.Cert

	if c.Subject.CommonName != "argocd-agent-ca" || c.Issuer.String() != c.Subject.String() {
		t.Errorf("subject %q issuer %q, want self-issued CN=argocd-agent-ca", c.Subject, c.Issuer)
	}
	if !c.BasicConstraintsValid || !c.IsCA {
		t.Errorf("BasicConstraintsValid=%v IsCA=%v, want both true", c.BasicConstraintsValid, c.IsCA)
	}
	if c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("MaxPathLen=%d MaxPathLenZero=%v, want 0/true", c.MaxPathLen, c.MaxPathLenZero)
	}
	wantKU := x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	if c.KeyUsage != wantKU {
		t.Errorf("KeyUsage = %b, want %b", c.KeyUsage, wantKU)
	}
	if len(c.ExtKeyUsage) != 0 {
		t.Errorf("ExtKeyUsage = %v, want none", c.ExtKeyUsage)
	}
	skid, err := subjectKeyID(c.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.SubjectKeyId) != 20 || !bytes.Equal(c.SubjectKeyId, skid) {
		t.Errorf("SubjectKeyId = %x, want %x", c.SubjectKeyId, skid)
	}
	if !c.NotBefore.Equal(t0.Add(-ClockSkewAllowance)) {
		t.Errorf("NotBefore = %v, want %v", c.NotBefore, t0.Add(-ClockSkewAllowance))
	}
	if !c.NotAfter.Equal(t0.Add(validity)) {
		t.Errorf("NotAfter = %v, want %v", c.NotAfter, t0.Add(validity))
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v: want positive and at most 128 bits", c.SerialNumber)
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("public key %T, want ECDSA P-256", c.PublicKey)
	}
	if c.SignatureAlgorithm != x509.ECDSAWithSHA256 {
		t.Errorf("SignatureAlgorithm = %v, want ECDSA-SHA256", c.SignatureAlgorithm)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("self-signature: %v", err)
	}
	if !publicKeysEqual(c.PublicKey, ca.Key.Public()) {
		t.Error("Key does not match Cert")
	}
	// The CA verifies as its own root.
	if err := VerifyChain(c, []*x509.Certificate{c}, x509.ExtKeyUsageAny, t0); err != nil {
		t.Errorf("CA does not verify against itself: %v", err)
	}

	// The PEM forms round-trip to the same pair.
	if b, _ := pem.Decode(ca.KeyPEM); b == nil || b.Type != PEMTypeECPrivateKey {
		t.Errorf("KeyPEM block %v, want %q", b, PEMTypeECPrivateKey)
	}
	back, err := ParseKeyPair(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		t.Fatalf("ParseKeyPair(CertPEM, KeyPEM): %v", err)
	}
	if !back.Cert.Equal(c) {
		t.Error("CertPEM does not hold Cert")
	}
}

func TestNewCAErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cn       string
		validity time.Duration
	}{
		{"empty common name", "", time.Hour},
		{"zero validity", "ca", 0},
		{"negative validity", "ca", -time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ca, err := NewCA(tc.cn, tc.validity, t0); err == nil {
				t.Fatalf("NewCA(%q, %v) = %v, want error", tc.cn, tc.validity, ca.Cert.Subject)
			}
		})
	}
}

func TestNewCAIsFreshEachTime(t *testing.T) {
	a, b := mustCA(t, time.Hour), mustCA(t, time.Hour)
	if a.Cert.SerialNumber.Cmp(b.Cert.SerialNumber) == 0 {
		t.Error("two CAs share a serial number")
	}
	if publicKeysEqual(a.Cert.PublicKey, b.Cert.PublicKey) {
		t.Error("two CAs share a key")
	}
}
