/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"net"
	"slices"
	"strings"
	"time"
)

// RenewalTime is when a certificate should be replaced: after two thirds of its lifetime, which
// leaves a third for retries and for agents to pick up the new one. Reconcilers requeue at it.
func RenewalTime(cert *x509.Certificate) time.Time {
	return RenewalTimeOf(cert.NotBefore, cert.NotAfter)
}

// RenewalTimeOf is RenewalTime of a certificate valid from notBefore to notAfter.
func RenewalTimeOf(notBefore, notAfter time.Time) time.Time {
	lifetime := notAfter.Sub(notBefore)
	if lifetime <= 0 {
		return notBefore
	}
	return notBefore.Add(lifetime / 3 * 2)
}

// NeedsRenewal reports whether cert is at or past its RenewalTime. A nil certificate needs
// renewal (there is nothing to keep).
func NeedsRenewal(cert *x509.Certificate, now time.Time) bool {
	if cert == nil {
		return true
	}
	return !now.Before(RenewalTime(cert))
}

// SANsMatch reports whether the certificate's subject alternative names are exactly the wanted
// DNS names and IP addresses, ignoring order, duplicates, DNS case and IPv4 spelling. Any other
// SAN (URI, e-mail) on the certificate counts as a difference. It tells when a server
// certificate must be re-issued because the principal's address changed.
func SANsMatch(cert *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	if cert == nil || len(cert.URIs) > 0 || len(cert.EmailAddresses) > 0 {
		return false
	}
	haveDNS, err1 := normalizeDNSNames(cert.DNSNames)
	wantDNS, err2 := normalizeDNSNames(dnsNames)
	haveIP, err3 := normalizeIPs(cert.IPAddresses)
	wantIP, err4 := normalizeIPs(ips)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return false
	}
	return slices.Equal(haveDNS, wantDNS) && slices.EqualFunc(haveIP, wantIP, net.IP.Equal)
}

// Fingerprint is the SHA-256 of the certificate's DER bytes as 64 upper-case hex characters
// without separators: the key format of argocd-agent's argocd-agent-tls-blocklist ConfigMap.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// VerifyChain checks that leaf chains to one of roots at time now and is valid for usage
// (x509.ExtKeyUsageAny to skip that check). It does not check host names.
func VerifyChain(leaf *x509.Certificate, roots []*x509.Certificate, usage x509.ExtKeyUsage, now time.Time) error {
	if leaf == nil {
		return errors.New("no certificate to verify")
	}
	pool := x509.NewCertPool()
	for _, r := range roots {
		if r != nil {
			pool.AddCert(r)
		}
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:       pool,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{usage},
	})
	return err
}

// TrustBundle builds the ca.crt content for a CA rotation with overlap: the current CA first,
// then the previous CAs that have not expired at now (newest NotAfter first, ties by DER), so
// certificates signed by the old CA keep verifying until they are replaced. Duplicates are
// dropped, and the output depends only on the inputs, so an unchanged bundle causes no write.
func TrustBundle(current *x509.Certificate, previous []*x509.Certificate, now time.Time) []byte {
	var keep []*x509.Certificate
	for _, c := range previous {
		if c == nil || now.After(c.NotAfter) || (current != nil && c.Equal(current)) {
			continue
		}
		keep = append(keep, c)
	}
	slices.SortFunc(keep, func(a, b *x509.Certificate) int {
		if c := b.NotAfter.Compare(a.NotAfter); c != 0 {
			return c
		}
		return bytes.Compare(a.Raw, b.Raw)
	})
	keep = slices.CompactFunc(keep, (*x509.Certificate).Equal)
	return EncodeCertificates(append([]*x509.Certificate{current}, keep...)...)
}
