package gitopscluster_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
)

// TestAgentsLeavingThePrincipalAreRevoked: when a cluster leaves the placement, or its
// GitOpsCluster is deleted, the certificates the signer recorded for it go on the principal's
// blocklist and its ledger is cleared; a cluster whose new owner uses the same principal keeps
// its certificate.
func TestAgentsLeavingThePrincipalAreRevoked(t *testing.T) {
	ctx := context.Background()
	const ns = "revocation"
	createNamespace(t, ns)
	createManagedClusters(t, "rvk-a", "rvk-b", "rvk-c")
	createPlacement(t, ns, "first")
	createPlacement(t, ns, "second")
	setDecisions(t, ns, "first", 0, "rvk-a", "rvk-b", "rvk-c")
	setDecisions(t, ns, "second", 0, "rvk-c")
	createGitOpsCluster(t, ns, "first", "first", withAddress("principal.example.com"))
	time.Sleep(1100 * time.Millisecond) // "second" must be younger, so "first" owns rvk-c
	createGitOpsCluster(t, ns, "second", "second", withAddress("principal.example.com"))
	secretExists := func(cluster string, want bool) error {
		err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: gitopscluster.ClusterSecretName(cluster)}, &corev1.Secret{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if exists := err == nil; exists != want {
			return fmt.Errorf("cluster secret of %s exists=%v, want %v", cluster, exists, want)
		}
		return nil
	}
	for _, c := range []string{"rvk-a", "rvk-b", "rvk-c"} {
		eventually(t, "cluster secret of "+c, func() error { return secretExists(c, true) })
	}

	// What the signer records when it issues (the reconciler's clock decides what has expired).
	now := clock.Now()
	ca, err := pki.NewCA("revocation-test", 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	certs := map[string]*x509.Certificate{}
	for _, c := range []string{"rvk-a", "rvk-b", "rvk-c"} {
		kp, err := ca.IssueClientCert(pkix.Name{CommonName: c}, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		certs[c] = kp.Cert
		if err := signer.RecordIssued(ctx, k8s, c, kp.Cert, now); err != nil {
			t.Fatal(err)
		}
	}
	blocked := func() map[string]string {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: signer.BlocklistName}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			t.Fatal(err)
		}
		return cm.Data
	}
	ledgerExists := func(cluster string) bool {
		err := k8s.Get(ctx, types.NamespacedName{Namespace: cluster, Name: signer.LedgerName}, &corev1.ConfigMap{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	// rvk-a leaves every placement; rvk-c passes to "second", which uses the same principal.
	setDecisions(t, ns, "first", 0, "rvk-b")
	eventually(t, "rvk-a revoked", func() error {
		if _, ok := blocked()[pki.Fingerprint(certs["rvk-a"])]; !ok {
			return fmt.Errorf("blocklist %v lacks rvk-a's certificate", blocked())
		}
		if ledgerExists("rvk-a") {
			return fmt.Errorf("rvk-a's ledger still exists")
		}
		return secretExists("rvk-a", false)
	})
	if _, ok := blocked()[pki.Fingerprint(certs["rvk-c"])]; ok {
		t.Error("rvk-c's certificate was blocked although its new owner uses the same principal")
	}
	if !ledgerExists("rvk-c") || !ledgerExists("rvk-b") {
		t.Error("the ledger of a cluster that stays was deleted")
	}
	if _, ok := blocked()[pki.Fingerprint(certs["rvk-b"])]; ok {
		t.Error("rvk-b's certificate was blocked although it is still selected")
	}

	// Deleting a GitOpsCluster revokes the agents it owned.
	if err := k8s.Delete(ctx, &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rvk-b revoked on deletion", func() error {
		if _, ok := blocked()[pki.Fingerprint(certs["rvk-b"])]; !ok {
			return fmt.Errorf("blocklist %v lacks rvk-b's certificate", blocked())
		}
		if ledgerExists("rvk-b") {
			return fmt.Errorf("rvk-b's ledger still exists")
		}
		return nil
	})
	if err := k8s.Delete(ctx, &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rvk-c revoked when its last GitOpsCluster goes", func() error {
		if _, ok := blocked()[pki.Fingerprint(certs["rvk-c"])]; !ok {
			return fmt.Errorf("blocklist %v lacks rvk-c's certificate", blocked())
		}
		return nil
	})
}
