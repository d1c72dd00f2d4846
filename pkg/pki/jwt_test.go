/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

func TestNewJWTSigningKey(t *testing.T) {
	keyPEM, err := NewJWTSigningKey()
	if err != nil {
		t.Fatalf("NewJWTSigningKey: %v", err)
	}
	block, rest := pem.Decode(keyPEM)
	if block == nil || block.Type != "PRIVATE KEY" || len(strings.TrimSpace(string(rest))) != 0 {
		t.Fatalf("want exactly one PEM block of type PRIVATE KEY, got %v", block)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("not PKCS#8: %v", err)
	}
	key, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		t.Fatalf("key is %T, want *rsa.PrivateKey", parsed)
	}
	if key.N.BitLen() != JWTKeyBits {
		t.Errorf("key has %d bits, want %d", key.N.BitLen(), JWTKeyBits)
	}

	// RS512, as the principal signs its tokens.
	digest := sha512.Sum512([]byte("header.payload"))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA512, digest[:])
	if err != nil {
		t.Fatalf("sign RS512: %v", err)
	}
	if err := rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA512, digest[:], sig); err != nil {
		t.Errorf("verify RS512: %v", err)
	}
	other := sha512.Sum512([]byte("header.tampered"))
	if err := rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA512, other[:], sig); err == nil {
		t.Error("signature verifies for a different payload")
	}

	if err := ValidateJWTSigningKey(keyPEM); err != nil {
		t.Errorf("ValidateJWTSigningKey(new key): %v", err)
	}
}

func TestValidateJWTSigningKey(t *testing.T) {
	rsa2048 := rsaKeyA()
	rsa1024 := genRSA(1024)
	ok2048 := pemBlock(PEMTypePrivateKey, pkcs8(t, rsa2048))
	if err := ValidateJWTSigningKey(ok2048); err != nil {
		t.Errorf("PKCS#8 RSA-2048 rejected: %v", err)
	}
	for _, tc := range []struct {
		name, substr string
		pem          []byte
	}{
		{"empty", "no PEM", nil},
		{"PKCS#1 RSA", "PKCS#8", pemBlock(PEMTypeRSAPrivateKey, x509.MarshalPKCS1PrivateKey(rsa2048))},
		{"ECDSA PKCS#8", "not an RSA key", pemBlock(PEMTypePrivateKey, pkcs8(t, genECDSA(t)))},
		{"Ed25519 PKCS#8", "not an RSA key", pemBlock(PEMTypePrivateKey, pkcs8(t, genEd25519(t)))},
		{"RSA-1024", "1024 bits", pemBlock(PEMTypePrivateKey, pkcs8(t, rsa1024))},
		{"corrupt DER", "parse PKCS#8", pemBlock(PEMTypePrivateKey, []byte{0x30, 0x01, 0x00})},
		{"a certificate", "want \"PRIVATE KEY\"", mustCA(t, time.Hour).CertPEM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateJWTSigningKey(tc.pem)
			if err == nil {
				t.Fatal("accepted, want error")
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Errorf("error %q does not mention %q", err, tc.substr)
			}
		})
	}
}
