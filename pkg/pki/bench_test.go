/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"testing"
	"time"
)

// BenchmarkSignClientCertificate measures the CSR signer's hot path: one agent client
// certificate for an ECDSA P-256 public key with OCM's default subject, per CA key type.
func BenchmarkSignClientCertificate(b *testing.B) {
	for _, bc := range []struct {
		name string
		ca   func(testing.TB, time.Duration) *KeyPair
	}{
		{"ECDSA-P256-CA", mustCA},
		{"RSA-2048-CA", mustRSACA},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ca := bc.ca(b, 365*24*time.Hour)
			pub := genECDSA(b).Public()
			subject := ocmSubject("cluster1")
			dns := []string{"argocd-agent-addon.addon.open-cluster-management.io"}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := ca.SignClientCertificate(pub, subject, dns, 24*time.Hour, t0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "certs/s")
		})
	}
}
