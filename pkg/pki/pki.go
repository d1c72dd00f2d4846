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
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

// ClockSkewAllowance is subtracted from "now" for every NotBefore we write, so a certificate
// issued on the hub is already valid on a spoke whose clock is a few minutes behind.
const ClockSkewAllowance = 5 * time.Minute

// PEM block types written and read by this package.
const (
	PEMTypeCertificate   = "CERTIFICATE"
	PEMTypeECPrivateKey  = "EC PRIVATE KEY"  // SEC 1, what we write for generated ECDSA keys
	PEMTypeRSAPrivateKey = "RSA PRIVATE KEY" // PKCS #1
	PEMTypePrivateKey    = "PRIVATE KEY"     // PKCS #8
)

// Errors callers may want to tell apart (with errors.Is) to set a precise condition reason.
var (
	// ErrKeyMismatch: the private key does not belong to the certificate's public key.
	ErrKeyMismatch = errors.New("private key does not match the certificate's public key")
	// ErrCAExpired: the CA's NotAfter has passed, so nothing it signs would verify.
	ErrCAExpired = errors.New("CA certificate has expired")
	// ErrNotCA: the key pair cannot act as an issuer (not a CA, no cert-sign usage, no key).
	ErrNotCA = errors.New("key pair cannot sign certificates")
)

// KeyPair is a certificate with its private key, in parsed and PEM form, because callers need
// the parsed form to sign and check expiry and the PEM form to write Secrets without re-encoding.
type KeyPair struct {
	// Cert is the parsed certificate (the first one of CertPEM).
	Cert *x509.Certificate
	// Key is the private key matching Cert's public key.
	Key crypto.Signer
	// CertPEM is the certificate as PEM, for a Secret's tls.crt / ca.crt.
	CertPEM []byte
	// KeyPEM is the private key as PEM, for a Secret's tls.key.
	KeyPEM []byte
}

// newSerial returns a random, positive serial of at most 128 bits. RFC 5280 asks for
// unpredictable serials (at least 64 bits of entropy) and allows up to 20 octets.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("generate serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// newECDSAKey generates the P-256 key used for every key pair we create: small, fast, and
// accepted by argocd-agent, Argo CD and the OCM registration agent alike.
func newECDSAKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ECDSA P-256 key: %w", err)
	}
	return key, nil
}

// encodePrivateKey returns PEM for a private key: SEC 1 for ECDSA (the conventional tls.key
// form), PKCS #8 for anything else.
func encodePrivateKey(key crypto.Signer) ([]byte, error) {
	if ec, ok := key.(*ecdsa.PrivateKey); ok {
		der, err := x509.MarshalECPrivateKey(ec)
		if err != nil {
			return nil, fmt.Errorf("marshal EC private key: %w", err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: PEMTypeECPrivateKey, Bytes: der}), nil
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal PKCS#8 private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PEMTypePrivateKey, Bytes: der}), nil
}

// subjectKeyID derives a key identifier from a public key (RFC 7093 method 1: the leftmost
// 160 bits of the SHA-256 of the subjectPublicKey bits), so chains can be built by key id.
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("marshal public key: %w", err)
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	sum := sha256.Sum256(spki.PublicKey.Bytes)
	return sum[:20], nil
}

// KeyMatches reports whether key is the private key of cert, as ParseKeyPair checks.
func KeyMatches(cert *x509.Certificate, key crypto.Signer) bool {
	return publicKeysEqual(cert.PublicKey, key.Public())
}

// publicKeysEqual reports whether two public keys are the same key. All key types of the
// standard library implement Equal; anything else is treated as different.
func publicKeysEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}

// checkPublicKey rejects public keys we will not certify: unsupported types and RSA keys
// below 2048 bits, which no longer give adequate security.
func checkPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k == nil || k.N == nil {
			return errors.New("empty RSA public key")
		}
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("RSA public key of %d bits is too small (need at least 2048)", k.N.BitLen())
		}
	case *ecdsa.PublicKey:
		if k == nil || k.Curve == nil {
			return errors.New("empty ECDSA public key")
		}
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("Ed25519 public key has %d bytes, want %d", len(k), ed25519.PublicKeySize)
		}
	case nil:
		return errors.New("no public key")
	default:
		return fmt.Errorf("unsupported public key type %T", pub)
	}
	return nil
}

// normalizeDNSNames lower-cases (DNS names compare case-insensitively), drops duplicates and
// sorts, so the same wanted set always yields the same certificate content.
func normalizeDNSNames(names []string) ([]string, error) {
	out := make([]string, 0, len(names))
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == "" {
			return nil, errors.New("empty DNS name")
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// normalizeIPs converts IPv4 addresses to their 4-byte form (so 16-byte and 4-byte spellings
// of one address collapse), drops duplicates and sorts.
func normalizeIPs(ips []net.IP) ([]net.IP, error) {
	out := make([]net.IP, 0, len(ips))
	for _, ip := range ips {
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		} else if len(ip) != net.IPv6len {
			return nil, fmt.Errorf("invalid IP address %v", ip)
		}
		out = append(out, slices.Clone(ip))
	}
	// Sort IPv4 before IPv6, then bytewise.
	slices.SortFunc(out, func(a, b net.IP) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return bytes.Compare(a, b)
	})
	return slices.CompactFunc(out, func(a, b net.IP) bool { return a.Equal(b) }), nil
}
