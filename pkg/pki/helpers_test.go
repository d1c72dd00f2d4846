/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"sync"
	"testing"
	"time"
)

// t0 is the fixed "now" of the tests; whole seconds, since certificates store no fractions.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// RSA key generation is slow, so the tests share a few keys.
var (
	rsaKeyA = sync.OnceValue(func() *rsa.PrivateKey { return genRSA(2048) })
	rsaKeyB = sync.OnceValue(func() *rsa.PrivateKey { return genRSA(2048) })
)

func genRSA(bits int) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		panic(err)
	}
	return k
}

func genECDSA(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func genEd25519(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustCA(t testing.TB, validity time.Duration) *KeyPair {
	t.Helper()
	ca, err := NewCA("argocd-agent-ca", validity, t0)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	return ca
}

func mustRSACA(t testing.TB, validity time.Duration) *KeyPair {
	t.Helper()
	ca, err := newCAWithKey("argocd-agent-rsa-ca", rsaKeyB(), validity, t0)
	if err != nil {
		t.Fatalf("newCAWithKey(RSA): %v", err)
	}
	return ca
}

// ocmSubject is the OCM addon-framework default subject for the addon agent: CN and O values
// are longer than the X.520 bound of 64 characters. Two OUs in non-alphabetical order check
// that order is kept.
func ocmSubject(cluster string) pkix.Name {
	return pkix.Name{
		CommonName: "system:open-cluster-management:cluster:" + cluster + ":addon:argocd-agent-addon:agent:argocd-agent-addon-agent",
		Organization: []string{
			"system:open-cluster-management:cluster:" + cluster + ":addon:argocd-agent-addon",
			"system:open-cluster-management:addon:argocd-agent-addon",
		},
		OrganizationalUnit: []string{"ou-z", "ou-a"},
	}
}

// csrFor builds and parses a CSR the way the OCM registration agent does (Go crypto/x509).
func csrFor(t testing.TB, key crypto.Signer, subject pkix.Name, dnsNames []string) *x509.CertificateRequest {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject, DNSNames: dnsNames}, key)
	if err != nil {
		t.Fatalf("CreateCertificateRequest: %v", err)
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatalf("ParseCertificateRequest: %v", err)
	}
	if err := csr.CheckSignature(); err != nil {
		t.Fatalf("CSR signature: %v", err)
	}
	return csr
}

func pkixCN(cn string) pkix.Name { return pkix.Name{CommonName: cn} }
