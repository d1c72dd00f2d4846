/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"
)

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func pkcs8(t *testing.T, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func sec1(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// selfSigned returns a certificate PEM for key.
func selfSigned(t *testing.T, key crypto.Signer) []byte {
	t.Helper()
	kp, err := newCAWithKey("self", key, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	return kp.CertPEM
}

func TestParseKeyPairFormats(t *testing.T) {
	ecKey := genECDSA(t)
	rsaKey := rsaKeyA()
	edKey := genEd25519(t)
	ca := mustCA(t, 24*time.Hour)
	leaf, err := ca.IssueServerCert("leaf", []string{"leaf"}, nil, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	ecParams := pemBlock("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07})

	for _, tc := range []struct {
		name    string
		certPEM []byte
		keyPEM  []byte
		want    crypto.Signer
	}{
		{"ECDSA SEC 1", selfSigned(t, ecKey), pemBlock(PEMTypeECPrivateKey, sec1(t, ecKey)), ecKey},
		{"ECDSA SEC 1 after EC PARAMETERS", selfSigned(t, ecKey), append(ecParams, pemBlock(PEMTypeECPrivateKey, sec1(t, ecKey))...), ecKey},
		{"ECDSA PKCS #8", selfSigned(t, ecKey), pemBlock(PEMTypePrivateKey, pkcs8(t, ecKey)), ecKey},
		{"RSA PKCS #1", selfSigned(t, rsaKey), pemBlock(PEMTypeRSAPrivateKey, x509.MarshalPKCS1PrivateKey(rsaKey)), rsaKey},
		{"RSA PKCS #8", selfSigned(t, rsaKey), pemBlock(PEMTypePrivateKey, pkcs8(t, rsaKey)), rsaKey},
		{"Ed25519 PKCS #8", selfSigned(t, edKey), pemBlock(PEMTypePrivateKey, pkcs8(t, edKey)), edKey},
		{"PKCS #8 under a PKCS #1 label", selfSigned(t, rsaKey), pemBlock(PEMTypeRSAPrivateKey, pkcs8(t, rsaKey)), rsaKey},
		{"chain, leaf first", append(bytes.Clone(leaf.CertPEM), ca.CertPEM...), leaf.KeyPEM, leaf.Key},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := ParseKeyPair(tc.certPEM, tc.keyPEM)
			if err != nil {
				t.Fatalf("ParseKeyPair: %v", err)
			}
			if !publicKeysEqual(kp.Key.Public(), tc.want.Public()) || !publicKeysEqual(kp.Cert.PublicKey, tc.want.Public()) {
				t.Errorf("parsed key %T does not equal the original", kp.Key)
			}
			if !bytes.Equal(kp.CertPEM, tc.certPEM) || !bytes.Equal(kp.KeyPEM, tc.keyPEM) {
				t.Error("PEM fields do not hold the input")
			}
			// The parsed key signs for the certificate's public key.
			digest := make([]byte, 32)
			var opts crypto.SignerOpts = crypto.SHA256
			if _, isEd := kp.Key.(ed25519.PrivateKey); isEd {
				opts = crypto.Hash(0)
			}
			if _, err := kp.Key.Sign(rand.Reader, digest, opts); err != nil {
				t.Errorf("parsed key cannot sign: %v", err)
			}
		})
	}
}

func TestParseKeyPairErrors(t *testing.T) {
	keyA, keyB := genECDSA(t), genECDSA(t)
	certA := selfSigned(t, keyA)
	keyAPEM := pemBlock(PEMTypeECPrivateKey, sec1(t, keyA))
	keyBPEM := pemBlock(PEMTypeECPrivateKey, sec1(t, keyB))
	ca := mustCA(t, time.Hour)
	leaf, err := ca.IssueClientCert(pkixCN("leaf"), time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	x25519, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	encrypted := pem.EncodeToMemory(&pem.Block{
		Type:    PEMTypeRSAPrivateKey,
		Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00112233445566778899AABBCCDDEEFF"},
		Bytes:   []byte("ciphertext"),
	})

	for _, tc := range []struct {
		name       string
		certPEM    []byte
		keyPEM     []byte
		wantErr    error
		wantSubstr string
	}{
		{name: "key of another certificate", certPEM: certA, keyPEM: keyBPEM, wantErr: ErrKeyMismatch},
		{name: "RSA key for an ECDSA certificate", certPEM: certA, keyPEM: pemBlock(PEMTypeRSAPrivateKey, x509.MarshalPKCS1PrivateKey(rsaKeyA())), wantErr: ErrKeyMismatch, wantSubstr: "RSA-2048"},
		{name: "chain in the wrong order", certPEM: append(bytes.Clone(ca.CertPEM), leaf.CertPEM...), keyPEM: leaf.KeyPEM, wantErr: ErrKeyMismatch},
		{name: "no certificate", certPEM: nil, keyPEM: keyAPEM, wantSubstr: "no CERTIFICATE"},
		{name: "key in the certificate slot", certPEM: keyAPEM, keyPEM: keyAPEM, wantSubstr: "unexpected PEM block"},
		{name: "no key", certPEM: certA, keyPEM: []byte("  \n"), wantSubstr: "no PEM data"},
		{name: "certificate in the key slot", certPEM: certA, keyPEM: certA, wantSubstr: "found CERTIFICATE"},
		{name: "two keys", certPEM: certA, keyPEM: append(bytes.Clone(keyAPEM), keyBPEM...), wantSubstr: "more than one"},
		{name: "legacy encrypted PEM", certPEM: certA, keyPEM: encrypted, wantSubstr: "encrypted"},
		{name: "PKCS #8 encrypted", certPEM: certA, keyPEM: pemBlock("ENCRYPTED PRIVATE KEY", []byte{1}), wantSubstr: "encrypted"},
		{name: "X25519 key cannot sign", certPEM: certA, keyPEM: pemBlock(PEMTypePrivateKey, pkcs8(t, x25519)), wantSubstr: "unsupported private key type"},
		{name: "corrupt key DER", certPEM: certA, keyPEM: pemBlock(PEMTypeECPrivateKey, []byte{0x30, 0x03, 0x02, 0x01}), wantSubstr: "parse EC PRIVATE KEY"},
		{name: "corrupt certificate DER", certPEM: pemBlock(PEMTypeCertificate, []byte{0x30, 0x00}), keyPEM: keyAPEM, wantSubstr: "parse certificate 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kp, err := ParseKeyPair(tc.certPEM, tc.keyPEM)
			if err == nil {
				t.Fatalf("ParseKeyPair = %v, want error", kp.Cert.Subject)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantSubstr) {
				t.Errorf("error %q does not mention %q", err, tc.wantSubstr)
			}
		})
	}
}

func TestParsePrivateKeyTypes(t *testing.T) {
	for _, tc := range []struct {
		name string
		pem  []byte
		want string
	}{
		{"SEC 1", pemBlock(PEMTypeECPrivateKey, sec1(t, genECDSA(t))), "*ecdsa.PrivateKey"},
		{"PKCS #1", pemBlock(PEMTypeRSAPrivateKey, x509.MarshalPKCS1PrivateKey(rsaKeyA())), "*rsa.PrivateKey"},
		{"PKCS #8 Ed25519", pemBlock(PEMTypePrivateKey, pkcs8(t, genEd25519(t))), "ed25519.PrivateKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := ParsePrivateKey(tc.pem)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			switch key.(type) {
			case *ecdsa.PrivateKey:
				got = "*ecdsa.PrivateKey"
			case *rsa.PrivateKey:
				got = "*rsa.PrivateKey"
			case ed25519.PrivateKey:
				got = "ed25519.PrivateKey"
			}
			if got != tc.want {
				t.Errorf("key type %T, want %s", key, tc.want)
			}
		})
	}
}

func TestParseCertificates(t *testing.T) {
	a, b, c := mustCA(t, time.Hour), mustCA(t, 2*time.Hour), mustCA(t, 3*time.Hour)
	bundle := []byte("# agent CA bundle\n")
	bundle = append(bundle, a.CertPEM...)
	bundle = append(bundle, "between blocks\n"...)
	bundle = append(bundle, b.CertPEM...)
	bundle = append(bundle, c.CertPEM...)
	bundle = append(bundle, "\n\n"...)

	certs, err := ParseCertificates(bundle)
	if err != nil {
		t.Fatalf("ParseCertificates: %v", err)
	}
	if len(certs) != 3 || !certs[0].Equal(a.Cert) || !certs[1].Equal(b.Cert) || !certs[2].Equal(c.Cert) {
		t.Fatalf("got %d certificates, want a, b, c in order", len(certs))
	}

	encoded := EncodeCertificates(a.Cert, nil, b.Cert, c.Cert)
	if want := append(append(bytes.Clone(a.CertPEM), b.CertPEM...), c.CertPEM...); !bytes.Equal(encoded, want) {
		t.Errorf("EncodeCertificates:\n%s\nwant\n%s", encoded, want)
	}
	if got := EncodeCertificates(); len(got) != 0 {
		t.Errorf("EncodeCertificates() = %q, want empty", got)
	}

	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"text only", []byte("not PEM at all")},
		{"key inside a bundle", append(bytes.Clone(a.CertPEM), a.KeyPEM...)},
		{"corrupt DER", append(bytes.Clone(a.CertPEM), pemBlock(PEMTypeCertificate, []byte{1, 2, 3})...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if certs, err := ParseCertificates(tc.in); err == nil {
				t.Errorf("ParseCertificates = %d certificates, want error", len(certs))
			}
		})
	}
}
