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
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// ParseKeyPair reads a certificate and its private key from PEM, as found in a
// kubernetes.io/tls Secret (tls.crt, tls.key), and checks that they belong together. When
// certPEM holds a chain, the first certificate is the one the key must match.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	key, err := ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	if !publicKeysEqual(certs[0].PublicKey, key.Public()) {
		return nil, fmt.Errorf("%w (certificate %q holds a %s key, private key is %s)",
			ErrKeyMismatch, certs[0].Subject.String(), describeKey(certs[0].PublicKey), describeKey(key.Public()))
	}
	return &KeyPair{
		Cert:    certs[0],
		Key:     key,
		CertPEM: bytes.Clone(certPEM),
		KeyPEM:  bytes.Clone(keyPEM),
	}, nil
}

// ParsePrivateKey reads the private key from PEM. It accepts SEC 1 ("EC PRIVATE KEY"),
// PKCS #1 ("RSA PRIVATE KEY") and PKCS #8 ("PRIVATE KEY": RSA, ECDSA, Ed25519), because
// user-supplied Secrets come from openssl, cert-manager and Go alike. "EC PARAMETERS" blocks,
// which `openssl ecparam -genkey` prints before the key, are skipped.
func ParsePrivateKey(keyPEM []byte) (crypto.Signer, error) {
	var seen []string
	var found *pem.Block
	for rest := keyPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch block.Type {
		case PEMTypeECPrivateKey, PEMTypeRSAPrivateKey, PEMTypePrivateKey:
			if found != nil {
				return nil, errors.New("more than one private key in PEM data")
			}
			found = block
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("encrypted private keys are not supported")
		default:
			seen = append(seen, block.Type)
		}
	}
	if found == nil {
		if len(seen) == 0 {
			return nil, errors.New("no PEM data found")
		}
		return nil, fmt.Errorf("no private key PEM block found (found %s)", strings.Join(seen, ", "))
	}
	if strings.Contains(found.Headers["Proc-Type"], "ENCRYPTED") {
		return nil, errors.New("encrypted private keys are not supported")
	}
	return parseKeyDER(found.Type, found.Bytes)
}

// keyParsers maps each private-key PEM label to its DER parser.
var keyParsers = map[string]func([]byte) (any, error){
	PEMTypePrivateKey:    func(b []byte) (any, error) { return x509.ParsePKCS8PrivateKey(b) },
	PEMTypeECPrivateKey:  func(b []byte) (any, error) { return x509.ParseECPrivateKey(b) },
	PEMTypeRSAPrivateKey: func(b []byte) (any, error) { return x509.ParsePKCS1PrivateKey(b) },
}

// parseKeyDER tries the parser matching the block type first, then the others, since some
// tools put a key under the wrong label; the matching parser's error is the one reported.
func parseKeyDER(blockType string, der []byte) (crypto.Signer, error) {
	order := []string{blockType}
	for _, t := range []string{PEMTypePrivateKey, PEMTypeECPrivateKey, PEMTypeRSAPrivateKey} {
		if t != blockType {
			order = append(order, t)
		}
	}
	var firstErr error
	for _, t := range order {
		key, err := keyParsers[t](der)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("parse %s: %w", blockType, err)
			}
			continue
		}
		switch k := key.(type) {
		case *rsa.PrivateKey:
			return k, nil
		case *ecdsa.PrivateKey:
			return k, nil
		case ed25519.PrivateKey:
			return k, nil
		default:
			return nil, fmt.Errorf("unsupported private key type %T (want RSA, ECDSA or Ed25519)", key)
		}
	}
	return nil, firstErr
}

// ParseCertificates reads every certificate of a PEM bundle (tls.crt with a chain, ca.crt
// with several CAs), in order. Text outside PEM blocks is ignored, as openssl does; any
// non-certificate block is an error, so a key pasted into a CA bundle does not go unnoticed.
func ParseCertificates(pemBytes []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := pemBytes; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != PEMTypeCertificate {
			return nil, fmt.Errorf("unexpected PEM block %q in certificate data", block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errors.New("no CERTIFICATE PEM block found")
	}
	return certs, nil
}

// EncodeCertificates writes certificates as concatenated PEM blocks, in the given order;
// nil entries are skipped.
func EncodeCertificates(certs ...*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		if c == nil {
			continue
		}
		_ = pem.Encode(&buf, &pem.Block{Type: PEMTypeCertificate, Bytes: c.Raw}) // a bytes.Buffer never fails
	}
	return buf.Bytes()
}

// describeKey names a public key's algorithm and size for error messages.
func describeKey(pub crypto.PublicKey) string {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA-%d", k.N.BitLen())
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	case ed25519.PublicKey:
		return "Ed25519"
	default:
		return fmt.Sprintf("%T", pub)
	}
}
