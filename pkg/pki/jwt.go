/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

const (
	// JWTKeyBits is the size of the RSA key NewJWTSigningKey generates.
	JWTKeyBits = 3072
	// MinJWTKeyBits is the smallest RSA key ValidateJWTSigningKey accepts (NIST's floor).
	MinJWTKeyBits = 2048
)

// NewJWTSigningKey generates the key for the argocd-agent-jwt Secret (data key jwt.key): an RSA
// key in PKCS #8 PEM ("PRIVATE KEY"). The principal signs RS512 tokens with it, so an ECDSA key
// would not load.
func NewJWTSigningKey() ([]byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, JWTKeyBits)
	if err != nil {
		return nil, fmt.Errorf("generate RSA-%d key: %w", JWTKeyBits, err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal PKCS#8 private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PEMTypePrivateKey, Bytes: der}), nil
}

// ValidateJWTSigningKey checks that an existing jwt.key is what the principal can load: a
// PKCS #8 PEM RSA key of at least MinJWTKeyBits bits. It lets the controller keep a valid
// user-provided key and replace a broken one.
func ValidateJWTSigningKey(pemBytes []byte) error {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return errors.New("jwt key: no PEM data found")
	}
	if block.Type != PEMTypePrivateKey {
		return fmt.Errorf("jwt key: PEM block is %q, want %q (PKCS#8)", block.Type, PEMTypePrivateKey)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("jwt key: parse PKCS#8: %w", err)
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		return fmt.Errorf("jwt key: %T is not an RSA key (tokens are signed RS512)", key)
	}
	if bits := rsaKey.N.BitLen(); bits < MinJWTKeyBits {
		return fmt.Errorf("jwt key: RSA key has %d bits, need at least %d", bits, MinJWTKeyBits)
	}
	if err := rsaKey.Validate(); err != nil {
		return fmt.Errorf("jwt key: %w", err)
	}
	return nil
}
