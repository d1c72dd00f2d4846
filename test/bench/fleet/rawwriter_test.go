package main

import (
	"context"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The raw CSR pace ends when its informer has seen every certificate: a CSR seen again (an
// update, a resync) counts once, and one without a certificate not at all.
func TestSeenObjectsCountsEachObjectOnce(t *testing.T) {
	certified := newSeenObjects("CSRs with a certificate")
	h := certified.handler(func(obj any) bool {
		return len(obj.(*certificatesv1.CertificateSigningRequest).Status.Certificate) > 0
	})
	csr := func(name string, cert bool) *certificatesv1.CertificateSigningRequest {
		c := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if cert {
			c.Status.Certificate = []byte("cert")
		}
		return c
	}
	done := certified.atLeast(2)
	h.OnAdd(csr("a", false), false)
	h.OnUpdate(csr("a", false), csr("a", true))
	h.OnUpdate(csr("a", true), csr("a", true))
	h.OnAdd(csr("b", false), false)
	if ok, state := done(context.Background()); ok || state != "1 of 2 CSRs with a certificate" {
		t.Fatalf("after one certificate: done %v, state %q", ok, state)
	}
	h.OnUpdate(csr("b", false), csr("b", true))
	if ok, _ := done(context.Background()); !ok {
		t.Fatal("after two certificates: not done")
	}
}
