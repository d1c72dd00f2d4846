package signer_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
)

// TestRevokedAndUnacceptedClustersAreRefused: a cluster its owner lists in
// spec.revokedClusters, or one the hub no longer accepts, gets no certificate, including the
// renewal OCM's agent asks for; undoing the revocation lets the next request through.
func TestRevokedAndUnacceptedClustersAreRefused(t *testing.T) {
	h := hub(t)
	ctx := context.Background()
	keys(t)

	goc := &v1alpha1.GitOpsCluster{}
	if err := h.admin.Get(ctx, types.NamespacedName{Namespace: gitopsNS, Name: "fleet"}, goc); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(goc.DeepCopy())
	goc.Spec.RevokedClusters = []string{"cluster3"}
	if err := h.admin.Patch(ctx, goc, patch); err != nil {
		t.Fatal(err)
	}
	csr := h.createCSR(t, agentOf("cluster3"), csrObject("cluster3", signerName, requestPEM(t, p256, agentRequest("cluster3"))))
	done := h.waitFinal(t, csr.Name)
	if c := condition(done, certificatesv1.CertificateFailed); c == nil || c.Reason != signer.ReasonRevoked || len(done.Status.Certificate) > 0 {
		t.Fatalf("revoked cluster's CSR: %+v, certificate %d bytes", done.Status.Conditions, len(done.Status.Certificate))
	}
	patch = client.MergeFrom(goc.DeepCopy())
	goc.Spec.RevokedClusters = nil
	if err := h.admin.Patch(ctx, goc, patch); err != nil {
		t.Fatal(err)
	}
	csr = h.createCSR(t, agentOf("cluster3"), csrObject("cluster3", signerName, requestPEM(t, p256, agentRequest("cluster3"))))
	h.waitSigned(t, csr.Name)

	// An AgentRevocation on the principal refuses the cluster whatever its owner lists.
	rev := &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: names.PrincipalNamespace(goc), Name: "cluster3"}}
	if err := h.admin.Create(ctx, rev); err != nil {
		t.Fatal(err)
	}
	csr = h.createCSR(t, agentOf("cluster3"), csrObject("cluster3", signerName, requestPEM(t, p256, agentRequest("cluster3"))))
	done = h.waitFinal(t, csr.Name)
	if c := condition(done, certificatesv1.CertificateFailed); c == nil || c.Reason != signer.ReasonRevoked || len(done.Status.Certificate) > 0 {
		t.Fatalf("CSR of a cluster with an AgentRevocation: %+v, certificate %d bytes", done.Status.Conditions, len(done.Status.Certificate))
	}
	if err := h.admin.Delete(ctx, rev); err != nil {
		t.Fatal(err)
	}
	csr = h.createCSR(t, agentOf("cluster3"), csrObject("cluster3", signerName, requestPEM(t, p256, agentRequest("cluster3"))))
	h.waitSigned(t, csr.Name)

	// A revocation follows the cluster to every principal: one made on another principal
	// refuses it here too.
	if err := h.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other-principal"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rev = &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: "other-principal", Name: "cluster3"}}
	if err := h.admin.Create(ctx, rev); err != nil {
		t.Fatal(err)
	}
	csr = h.createCSR(t, agentOf("cluster3"), csrObject("cluster3", signerName, requestPEM(t, p256, agentRequest("cluster3"))))
	done = h.waitFinal(t, csr.Name)
	if c := condition(done, certificatesv1.CertificateFailed); c == nil || c.Reason != signer.ReasonRevoked || len(done.Status.Certificate) > 0 {
		t.Fatalf("CSR of a cluster revoked on another principal: %+v, certificate %d bytes", done.Status.Conditions, len(done.Status.Certificate))
	}
	if err := h.admin.Delete(ctx, rev); err != nil {
		t.Fatal(err)
	}
	csr = h.createCSR(t, agentOf("cluster3"), csrObject("cluster3", signerName, requestPEM(t, p256, agentRequest("cluster3"))))
	h.waitSigned(t, csr.Name)

	mc := &clusterv1.ManagedCluster{}
	if err := h.admin.Get(ctx, types.NamespacedName{Name: "cluster2"}, mc); err != nil {
		t.Fatal(err)
	}
	mc.Spec.HubAcceptsClient = false
	if err := h.admin.Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.admin.Get(ctx, types.NamespacedName{Name: "cluster2"}, mc); err == nil {
			mc.Spec.HubAcceptsClient = true
			_ = h.admin.Update(ctx, mc)
		}
	})
	csr = h.createCSR(t, agentOf("cluster2"), csrObject("cluster2", signerName, requestPEM(t, p256, agentRequest("cluster2"))))
	done = h.waitFinal(t, csr.Name)
	if c := condition(done, certificatesv1.CertificateFailed); c == nil || c.Reason != signer.ReasonClusterNotAccepted {
		t.Fatalf("unaccepted cluster's CSR: %+v", done.Status.Conditions)
	}
}

// TestCertificateCapIsCheckedBeforeApproval: a cluster that already holds the maximum number of
// unexpired certificates gets a refusal, not an approved request that then fails.
func TestCertificateCapIsCheckedBeforeApproval(t *testing.T) {
	h := hub(t)
	ctx := context.Background()
	keys(t)
	now := time.Now()
	store := ledger.Store{Client: h.admin, Reader: h.admin, Namespace: principalNS}
	full := ledger.Entries{}
	for i := range signer.DefaultMaxCertificatesPerCluster {
		full[fmt.Sprintf("%X", sha256.Sum256(fmt.Appendf(nil, "cap-%d", i)))] = now.Add(time.Hour).Truncate(time.Second)
	}
	if err := store.Merge(ctx, "cluster3", ledger.Owner{Namespace: gitopsNS, Name: "fleet"}, full, now); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.admin.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: principalNS, Name: ledger.LedgerName("cluster3")}})
	})
	eventually(t, "the full ledger is cached", func() error {
		cm := &corev1.ConfigMap{}
		if err := h.mgr.GetCache().Get(ctx, types.NamespacedName{Namespace: principalNS, Name: ledger.LedgerName("cluster3")}, cm); err != nil {
			return err
		}
		if len(cm.Data) < signer.DefaultMaxCertificatesPerCluster {
			return fmt.Errorf("%d entries cached", len(cm.Data))
		}
		return nil
	})
	csr := h.createCSR(t, agentOf("cluster3"), csrObject("cluster3", signerName, requestPEM(t, p256, agentRequest("cluster3"))))
	done := h.waitFinal(t, csr.Name)
	if c := condition(done, certificatesv1.CertificateFailed); c == nil || c.Reason != signer.ReasonTooManyCertificates {
		t.Fatalf("CSR of a cluster at its cap: %+v", done.Status.Conditions)
	}
	if c := condition(done, certificatesv1.CertificateApproved); c != nil {
		t.Errorf("the request of a cluster at its cap was approved: %+v", c)
	}
}
