/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// NewCA creates a self-signed ECDSA P-256 CA for argocd-agent (the argocd-agent-ca secret).
// Its path length is 0: it signs leaf certificates only, never another CA.
func NewCA(commonName string, validity time.Duration, now time.Time) (*KeyPair, error) {
	key, err := newECDSAKey()
	if err != nil {
		return nil, err
	}
	return newCAWithKey(commonName, key, validity, now)
}

// newCAWithKey self-signs a CA certificate for an existing key; tests use it for RSA CAs.
func newCAWithKey(commonName string, key crypto.Signer, validity time.Duration, now time.Time) (*KeyPair, error) {
	if commonName == "" {
		return nil, errors.New("CA common name must not be empty")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("CA validity must be positive, got %v", validity)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	skid, err := subjectKeyID(key.Public())
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-ClockSkewAllowance),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		SubjectKeyId:          skid,
	}
	return finish(tmpl, tmpl, key.Public(), key, key)
}

// finish signs tmpl with signer (as parent), parses the result back, and packs a KeyPair.
// key is the new certificate's private key; nil when the caller keeps it (CSR signing).
func finish(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer, key crypto.Signer) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("sign certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse signed certificate: %w", err)
	}
	kp := &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: PEMTypeCertificate, Bytes: der}),
	}
	if key != nil {
		if kp.KeyPEM, err = encodePrivateKey(key); err != nil {
			return nil, err
		}
	}
	return kp, nil
}

// checkIssuer makes sure ca can sign at time now, so callers get a clear error instead of a
// certificate that will never verify.
func (ca *KeyPair) checkIssuer(now time.Time) error {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return fmt.Errorf("%w: CA certificate or key missing", ErrNotCA)
	}
	if !ca.Cert.BasicConstraintsValid || !ca.Cert.IsCA {
		return fmt.Errorf("%w: %q is not a CA certificate", ErrNotCA, ca.Cert.Subject.String())
	}
	if ca.Cert.KeyUsage != 0 && ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return fmt.Errorf("%w: %q lacks the certSign key usage", ErrNotCA, ca.Cert.Subject.String())
	}
	if !publicKeysEqual(ca.Cert.PublicKey, ca.Key.Public()) {
		return fmt.Errorf("%w: CA %w", ErrNotCA, ErrKeyMismatch)
	}
	if now.After(ca.Cert.NotAfter) {
		return fmt.Errorf("%w: %q expired at %s", ErrCAExpired, ca.Cert.Subject.String(), ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// leafTemplate builds the common part of every leaf certificate: fresh serial, validity
// window (skew allowance before now, never outside the CA's own window) and key ids.
func (ca *KeyPair) leafTemplate(pub crypto.PublicKey, validity time.Duration, now time.Time) (*x509.Certificate, error) {
	if err := ca.checkIssuer(now); err != nil {
		return nil, err
	}
	if validity <= 0 {
		return nil, fmt.Errorf("validity must be positive, got %v", validity)
	}
	if err := checkPublicKey(pub); err != nil {
		return nil, err
	}
	notBefore := now.Add(-ClockSkewAllowance)
	if notBefore.Before(ca.Cert.NotBefore) {
		notBefore = ca.Cert.NotBefore
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	if !notAfter.After(notBefore) {
		return nil, fmt.Errorf("empty validity window %s..%s (CA valid %s..%s)",
			notBefore.UTC().Format(time.RFC3339), notAfter.UTC().Format(time.RFC3339),
			ca.Cert.NotBefore.UTC().Format(time.RFC3339), ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	skid, err := subjectKeyID(pub)
	if err != nil {
		return nil, err
	}
	// A CA from elsewhere may lack a key id; then the AuthorityKeyId is left out rather than
	// invented, since verifiers compare it with the issuer's SubjectKeyId.
	akid := ca.Cert.SubjectKeyId
	return &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		IsCA:                  false,
		SubjectKeyId:          skid,
		AuthorityKeyId:        akid,
	}, nil
}
