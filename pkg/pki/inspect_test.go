/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"crypto/sha256"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"testing"
	"time"
)

func TestNeedsRenewal(t *testing.T) {
	start := t0
	cert := &x509.Certificate{NotBefore: start, NotAfter: start.Add(90 * time.Hour)}
	renewAt := start.Add(60 * time.Hour)
	if got := RenewalTime(cert); !got.Equal(renewAt) {
		t.Fatalf("RenewalTime = %v, want %v", got, renewAt)
	}
	for _, tc := range []struct {
		name string
		now  time.Time
		want bool
	}{
		{"before NotBefore", start.Add(-time.Hour), false},
		{"at issue", start, false},
		{"just before two thirds", renewAt.Add(-time.Nanosecond), false},
		{"exactly two thirds", renewAt, true},
		{"after two thirds", renewAt.Add(time.Second), true},
		{"expired", start.Add(100 * time.Hour), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NeedsRenewal(cert, tc.now); got != tc.want {
				t.Errorf("NeedsRenewal(at %v) = %v, want %v", tc.now.Sub(start), got, tc.want)
			}
		})
	}

	if !NeedsRenewal(nil, t0) {
		t.Error("NeedsRenewal(nil) = false, want true")
	}
	broken := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(-time.Hour)}
	if !NeedsRenewal(broken, t0) || !RenewalTime(broken).Equal(t0) {
		t.Error("a certificate with NotAfter before NotBefore must be renewed at once")
	}

	// On a real certificate: the skew allowance counts as lifetime.
	ca := mustCA(t, 30*time.Hour)
	want := ca.Cert.NotBefore.Add((30*time.Hour + ClockSkewAllowance) / 3 * 2)
	if got := RenewalTime(ca.Cert); !got.Equal(want) {
		t.Errorf("RenewalTime(CA) = %v, want %v", got, want)
	}
}

func TestSANsMatch(t *testing.T) {
	ip := net.ParseIP
	cert := &x509.Certificate{
		DNSNames:    []string{"argocd-agent-principal.argocd.svc", "principal.example.com"},
		IPAddresses: []net.IP{ip("10.0.0.7").To4(), ip("fd00::7")},
	}
	for _, tc := range []struct {
		name string
		dns  []string
		ips  []net.IP
		want bool
	}{
		{"same", []string{"argocd-agent-principal.argocd.svc", "principal.example.com"}, []net.IP{ip("10.0.0.7"), ip("fd00::7")}, true},
		{"other order, duplicates, case", []string{"Principal.example.com", "argocd-agent-principal.argocd.svc", "principal.example.com"}, []net.IP{ip("fd00::7"), ip("10.0.0.7"), ip("10.0.0.7").To4()}, true},
		{"missing DNS name", []string{"principal.example.com"}, []net.IP{ip("10.0.0.7"), ip("fd00::7")}, false},
		{"extra DNS name", []string{"argocd-agent-principal.argocd.svc", "principal.example.com", "new.example.com"}, []net.IP{ip("10.0.0.7"), ip("fd00::7")}, false},
		{"changed IP", []string{"argocd-agent-principal.argocd.svc", "principal.example.com"}, []net.IP{ip("10.0.0.8"), ip("fd00::7")}, false},
		{"missing IP", []string{"argocd-agent-principal.argocd.svc", "principal.example.com"}, []net.IP{ip("10.0.0.7")}, false},
		{"IP as DNS name", []string{"argocd-agent-principal.argocd.svc", "principal.example.com", "10.0.0.7"}, []net.IP{ip("fd00::7")}, false},
		{"nothing wanted", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SANsMatch(cert, tc.dns, tc.ips); got != tc.want {
				t.Errorf("SANsMatch = %v, want %v", got, tc.want)
			}
		})
	}

	if SANsMatch(nil, nil, nil) {
		t.Error("SANsMatch(nil) = true")
	}
	if !SANsMatch(&x509.Certificate{}, nil, nil) {
		t.Error("no SANs wanted and none present: want true")
	}
	withURI := &x509.Certificate{DNSNames: []string{"a"}, URIs: []*url.URL{{Scheme: "spiffe", Host: "x"}}}
	if SANsMatch(withURI, []string{"a"}, nil) {
		t.Error("a certificate with an extra URI SAN matched")
	}
	if SANsMatch(cert, []string{""}, nil) {
		t.Error("an empty wanted DNS name matched")
	}
}

func TestFingerprint(t *testing.T) {
	a, b := mustCA(t, time.Hour), mustCA(t, time.Hour)
	fp := Fingerprint(a.Cert)
	if !regexp.MustCompile(`^[0-9A-F]{64}$`).MatchString(fp) {
		t.Fatalf("Fingerprint = %q, want 64 upper-case hex characters", fp)
	}
	if want := fmt.Sprintf("%X", sha256.Sum256(a.Cert.Raw)); fp != want {
		t.Errorf("Fingerprint = %s, want SHA-256 of DER %s", fp, want)
	}
	if Fingerprint(b.Cert) == fp {
		t.Error("two certificates share a fingerprint")
	}
	// Stable for the same certificate, however it was loaded.
	again, err := ParseCertificates(a.CertPEM)
	if err != nil || Fingerprint(again[0]) != fp {
		t.Errorf("fingerprint of the re-parsed certificate differs (%v)", err)
	}
}

func TestVerifyChain(t *testing.T) {
	ca, other := mustCA(t, 48*time.Hour), mustCA(t, 48*time.Hour)
	leaf, err := ca.IssueClientCert(pkixCN("agent"), 24*time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		leaf  *x509.Certificate
		roots []*x509.Certificate
		usage x509.ExtKeyUsage
		now   time.Time
		ok    bool
	}{
		{"issuing CA", leaf.Cert, []*x509.Certificate{ca.Cert}, x509.ExtKeyUsageClientAuth, t0, true},
		{"bundle holding the CA", leaf.Cert, []*x509.Certificate{other.Cert, nil, ca.Cert}, x509.ExtKeyUsageClientAuth, t0, true},
		{"any usage", leaf.Cert, []*x509.Certificate{ca.Cert}, x509.ExtKeyUsageAny, t0, true},
		{"other CA", leaf.Cert, []*x509.Certificate{other.Cert}, x509.ExtKeyUsageClientAuth, t0, false},
		{"no roots", leaf.Cert, nil, x509.ExtKeyUsageClientAuth, t0, false},
		{"wrong usage", leaf.Cert, []*x509.Certificate{ca.Cert}, x509.ExtKeyUsageServerAuth, t0, false},
		{"leaf expired", leaf.Cert, []*x509.Certificate{ca.Cert}, x509.ExtKeyUsageClientAuth, t0.Add(25 * time.Hour), false},
		{"not yet valid", leaf.Cert, []*x509.Certificate{ca.Cert}, x509.ExtKeyUsageClientAuth, t0.Add(-time.Hour), false},
		{"nil leaf", nil, []*x509.Certificate{ca.Cert}, x509.ExtKeyUsageClientAuth, t0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifyChain(tc.leaf, tc.roots, tc.usage, tc.now)
			if (err == nil) != tc.ok {
				t.Errorf("VerifyChain error = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestTrustBundle(t *testing.T) {
	// CAs made at t0 with different lifetimes; "now" is a day later.
	now := t0.Add(24 * time.Hour)
	current := mustCA(t, 365*24*time.Hour).Cert
	expired := mustCA(t, time.Hour).Cert
	justExpired := mustCA(t, 24*time.Hour-time.Second).Cert
	older := mustCA(t, 30*24*time.Hour).Cert
	newer := mustCA(t, 60*24*time.Hour).Cert
	sameEnd1, sameEnd2 := mustCA(t, 10*24*time.Hour).Cert, mustCA(t, 10*24*time.Hour).Cert
	atEdge := mustCA(t, 24*time.Hour).Cert // NotAfter == now: still valid

	tieFirst, tieSecond := sameEnd1, sameEnd2
	if string(tieFirst.Raw) > string(tieSecond.Raw) {
		tieFirst, tieSecond = tieSecond, tieFirst
	}
	want := []*x509.Certificate{current, newer, older, tieFirst, tieSecond, atEdge}

	inputs := [][]*x509.Certificate{
		{expired, older, current, newer, nil, sameEnd1, justExpired, sameEnd2, atEdge, older},
		{atEdge, sameEnd2, newer, justExpired, sameEnd1, older, expired},
	}
	var first []byte
	for i, prev := range inputs {
		got := TrustBundle(current, prev, now)
		certs, err := ParseCertificates(got)
		if err != nil {
			t.Fatalf("input %d: bundle does not parse: %v", i, err)
		}
		if !slices.EqualFunc(certs, want, (*x509.Certificate).Equal) {
			t.Errorf("input %d: bundle holds %d certificates %v, want %d %v", i, len(certs), names(certs), len(want), names(want))
		}
		if first == nil {
			first = got
		} else if string(got) != string(first) {
			t.Errorf("input %d: bundle depends on input order", i)
		}
	}

	// Only the current CA when nothing else is valid; current is kept even when expired.
	if got := TrustBundle(current, []*x509.Certificate{expired}, now); string(got) != string(EncodeCertificates(current)) {
		t.Error("expired previous CA kept")
	}
	if got := TrustBundle(expired, nil, now); string(got) != string(EncodeCertificates(expired)) {
		t.Error("current CA dropped")
	}
	if got := TrustBundle(nil, []*x509.Certificate{older}, now); string(got) != string(EncodeCertificates(older)) {
		t.Error("nil current CA not skipped")
	}
}

func names(certs []*x509.Certificate) []string {
	var out []string
	for _, c := range certs {
		out = append(out, c.NotAfter.Format(time.RFC3339)+"/"+Fingerprint(c)[:8])
	}
	return out
}
