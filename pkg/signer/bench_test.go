package signer_test

import (
	"crypto"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
)

// BenchmarkCheckAndSign measures the signer's per-CSR work without the API server: CheckCSR
// (PEM and DER parsing, signature, subject and SAN walk) and IssueCertificate (signing with an
// ECDSA P-256 hub CA), plus the fingerprint for the ledger. It reports certificates per second.
func BenchmarkCheckAndSign(b *testing.B) {
	keys(b)
	now := time.Now()
	ca, err := pki.NewCA("bench-ca", 24*time.Hour, now)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		key  crypto.Signer
	}{{"ECDSA-P256", p256}, {"RSA-2048", rsa2048}} {
		b.Run(bc.name, func(b *testing.B) {
			csr := csrObject("cluster1", signerName, requestPEM(b, bc.key, agentRequest("cluster1")))
			id := agentOf("cluster1")
			csr.Spec.Username, csr.Spec.Groups = id.user, id.groups
			csr.CreationTimestamp = metav1.NewTime(now)
			exp := signer.DefaultExpectation(signerName, "cluster1", addonName)
			exp.MaxAge, exp.Now = time.Hour, now
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				req, rej := signer.CheckCSR(csr, exp)
				if rej != nil {
					b.Fatal(rej)
				}
				_, cert, err := signer.IssueCertificate(ca, req, signer.DefaultValidity, now)
				if err != nil {
					b.Fatal(err)
				}
				_ = pki.Fingerprint(cert)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "certs/s")
		})
	}
}
