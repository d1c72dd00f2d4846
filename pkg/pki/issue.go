/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"reflect"
	"slices"
	"time"
)

// IssueServerCert issues a TLS server certificate (principal gRPC, resource proxy) with a fresh
// ECDSA P-256 key. The SANs are de-duplicated and sorted, so the same input yields the same
// certificate content and SANsMatch can tell when a re-issue is needed. NotAfter never goes
// past the CA's own NotAfter.
func (ca *KeyPair) IssueServerCert(cn string, dnsNames []string, ips []net.IP, validity time.Duration, now time.Time) (*KeyPair, error) {
	dns, err := normalizeDNSNames(dnsNames)
	if err != nil {
		return nil, err
	}
	addrs, err := normalizeIPs(ips)
	if err != nil {
		return nil, err
	}
	if len(dns) == 0 && len(addrs) == 0 {
		// Clients check SANs only; a server certificate without any cannot be verified.
		return nil, errors.New("a server certificate needs at least one DNS name or IP address")
	}
	key, err := newECDSAKey()
	if err != nil {
		return nil, err
	}
	tmpl, err := ca.leafTemplate(key.Public(), validity, now)
	if err != nil {
		return nil, err
	}
	tmpl.Subject = pkix.Name{CommonName: cn}
	tmpl.DNSNames = dns
	tmpl.IPAddresses = addrs
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	return finish(tmpl, ca.Cert, key.Public(), ca.Key, key)
}

// IssueClientCert issues an mTLS client certificate with a fresh ECDSA P-256 key, e.g. the one
// in an Argo CD cluster secret whose CN is the agent name (the resource proxy identifies the
// agent by it).
func (ca *KeyPair) IssueClientCert(subject pkix.Name, validity time.Duration, now time.Time) (*KeyPair, error) {
	key, err := newECDSAKey()
	if err != nil {
		return nil, err
	}
	tmpl, err := ca.clientTemplate(key.Public(), subject, nil, validity, now)
	if err != nil {
		return nil, err
	}
	return finish(tmpl, ca.Cert, key.Public(), ca.Key, key)
}

// SignClientCertificate signs a client certificate for a public key the caller does not hold
// the private key of (the CSR signer's case). The subject is copied exactly, attribute order
// included, because the OCM registration agent re-requests a certificate whose subject differs
// from the one it asked for, and argocd-agent matches its auth regex against Subject.String().
// It returns the certificate as PEM and parsed.
func (ca *KeyPair) SignClientCertificate(pub crypto.PublicKey, subject pkix.Name, dnsNames []string, validity time.Duration, now time.Time) ([]byte, *x509.Certificate, error) {
	tmpl, err := ca.clientTemplate(pub, subject, dnsNames, validity, now)
	if err != nil {
		return nil, nil, err
	}
	kp, err := finish(tmpl, ca.Cert, pub, ca.Key, nil)
	if err != nil {
		return nil, nil, err
	}
	return kp.CertPEM, kp.Cert, nil
}

// clientTemplate is the shared client-certificate profile: ClientAuth only, so a leaked agent
// certificate can never serve TLS.
func (ca *KeyPair) clientTemplate(pub crypto.PublicKey, subject pkix.Name, dnsNames []string, validity time.Duration, now time.Time) (*x509.Certificate, error) {
	if len(subject.ToRDNSequence()) == 0 && len(subject.Names) == 0 {
		return nil, errors.New("client certificate subject must not be empty")
	}
	dns, err := normalizeDNSNames(dnsNames)
	if err != nil {
		return nil, err
	}
	tmpl, err := ca.leafTemplate(pub, validity, now)
	if err != nil {
		return nil, err
	}
	tmpl.Subject = templateSubject(subject)
	tmpl.DNSNames = dns
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if _, isRSA := pub.(*rsa.PublicKey); isRSA {
		// Only RSA keys can do key transport (RSA key exchange); ECDSA and Ed25519 cannot.
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return tmpl, nil
}

// templateSubject prepares a subject for x509.CreateCertificate so that it is written as
// requested. x509 marshals only the typed fields (in a fixed order, several values of one
// field as one multi-valued RDN) and ExtraNames, and ignores Names.
//
// A subject parsed from a CSR made with Go (the OCM registration agent) has typed fields that
// reproduce its Names exactly, so the typed fields are used and the certificate's subject is
// byte for byte the CSR's. When Names holds something the typed fields cannot express (another
// attribute order, or attributes without a typed field such as UID), Names is handed over as
// ExtraNames, which keeps every attribute in its original order, one per RDN (pkix.Name does
// not record how attributes were grouped into RDNs). A subject built by hand, or whose typed
// fields were edited after parsing, is used as is.
func templateSubject(s pkix.Name) pkix.Name {
	out := s
	out.Names = nil
	if len(s.ExtraNames) > 0 || len(s.Names) == 0 {
		return out
	}
	var parsed pkix.Name
	parsed.FillFromRDNSequence(&pkix.RDNSequence{pkix.RelativeDistinguishedNameSET(slices.Clone(s.Names))})
	if !sameTypedFields(parsed, s) {
		return out // typed fields were changed after parsing: they win
	}
	var typed []pkix.AttributeTypeAndValue
	for _, rdn := range out.ToRDNSequence() {
		typed = append(typed, rdn...)
	}
	if slices.EqualFunc(typed, s.Names, sameAttribute) {
		return out
	}
	out.ExtraNames = slices.Clone(s.Names)
	return out
}

// sameAttribute compares one subject attribute by type and value.
func sameAttribute(a, b pkix.AttributeTypeAndValue) bool {
	return a.Type.Equal(b.Type) && reflect.DeepEqual(a.Value, b.Value)
}

// sameTypedFields compares the typed fields x509 would marshal from a pkix.Name.
func sameTypedFields(a, b pkix.Name) bool {
	return a.CommonName == b.CommonName && a.SerialNumber == b.SerialNumber &&
		slices.Equal(a.Country, b.Country) &&
		slices.Equal(a.Organization, b.Organization) &&
		slices.Equal(a.OrganizationalUnit, b.OrganizationalUnit) &&
		slices.Equal(a.Locality, b.Locality) &&
		slices.Equal(a.Province, b.Province) &&
		slices.Equal(a.StreetAddress, b.StreetAddress) &&
		slices.Equal(a.PostalCode, b.PostalCode)
}
