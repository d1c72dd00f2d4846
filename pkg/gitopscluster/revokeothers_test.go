package gitopscluster_test

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
)

// TestSpecRevocationCannotReachAnotherOwnersCluster: a tenant's GitOpsCluster on a principal it
// is allowed to use, whose Placement also selects a cluster an older GitOpsCluster owns, lists
// that cluster and one of its own in spec.revokedClusters. Its own is revoked; the other
// owner's keeps its cluster secret, ledger and certificates, and no AgentRevocation is made
// for it.
func TestSpecRevocationCannotReachAnotherOwnersCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "revoke-others")
	const tenant = "revoke-others-tenant"
	createNamespace(t, tenant)
	ns := &corev1.Namespace{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: f.ns}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Annotations = map[string]string{v1alpha1.AnnotationAllowedGitOpsClusterNamespaces: tenant}
	if err := k8s.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}

	createManagedClusters(t, "ro-owned", "ro-tenants")
	createPlacement(t, f.ns, "p")
	setDecisions(t, f.ns, "p", 0, "ro-owned")
	createGitOpsCluster(t, f.ns, "g", "p", withAddress("principal.example.com"))
	time.Sleep(1100 * time.Millisecond) // the tenant's must be younger, so "g" owns ro-owned
	createPlacement(t, tenant, "p")
	setDecisions(t, tenant, "p", 0, "ro-owned", "ro-tenants")
	createGitOpsCluster(t, tenant, "g", "p", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.PrincipalNamespace = f.ns
	})
	f.waitSecrets("ro-owned", "ro-tenants")
	f.issue("g", "ro-owned")
	kp, err := f.ca.IssueClientCert(pkix.Name{CommonName: "ro-tenants"}, time.Hour, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	f.certs["ro-tenants"] = kp.Cert
	if err := f.store().Record(ctx, "ro-tenants", ledger.Owner{Namespace: tenant, Name: "g"}, kp.Cert, 0, clock.Now()); err != nil {
		t.Fatal(err)
	}

	g := getGOC(t, tenant, "g")
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.RevokedClusters = []string{"ro-owned", "ro-tenants"}
	if err := k8s.Patch(ctx, g, patch); err != nil {
		t.Fatal(err)
	}
	// The list does act: the tenant's own cluster goes.
	f.waitRevoked("ro-tenants")
	f.neverRevoked(2*departureSettle, "ro-owned")
	err = k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "ro-owned"}, &v1alpha1.AgentRevocation{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("an AgentRevocation for the other owner's cluster: %v", err)
	}
	if n := getGOC(t, f.ns, "g").Status.RevokedAgents; n != 0 {
		t.Errorf("the owner counts %d revoked agents", n)
	}
}

// TestSpecRevocationAfterATakeover: a GitOpsCluster that registered a cluster, which an older
// GitOpsCluster of another principal has since taken over, cannot revoke it through
// spec.revokedClusters while its own records of the cluster wait out the departure: an
// AgentRevocation holds on every principal, and the new owner's people could not lift it.
func TestSpecRevocationAfterATakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "takeover-a")
	const older = "takeover-b"
	createNamespace(t, older)
	createManagedClusters(t, "to-x")
	createPlacement(t, older, "p")
	setDecisions(t, older, "p", 0)
	createGitOpsCluster(t, older, "g", "p", withAddress("principal-b.example.com"))
	time.Sleep(1100 * time.Millisecond) // the fixture's GitOpsCluster must be the younger one
	createPlacement(t, f.ns, "p")
	setDecisions(t, f.ns, "p", 0, "to-x")
	createGitOpsCluster(t, f.ns, "g", "p", withAddress("principal-a.example.com"))
	f.waitSecrets("to-x")

	setDecisions(t, older, "p", 0, "to-x")
	eventually(t, "the older GitOpsCluster registers to-x on its principal", func() error {
		return k8s.Get(ctx, types.NamespacedName{Namespace: older, Name: agentsecret.Name("to-x")}, &corev1.Secret{})
	})
	g := getGOC(t, f.ns, "g")
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.RevokedClusters = []string{"to-x"}
	if err := k8s.Patch(ctx, g, patch); err != nil {
		t.Fatal(err)
	}
	consistently(t, "no AgentRevocation for a cluster another GitOpsCluster owns", 2*time.Second, func() error {
		err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "to-x"}, &v1alpha1.AgentRevocation{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("AgentRevocation %s/to-x: %v", f.ns, err)
		}
		return nil
	})
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: older, Name: agentsecret.Name("to-x")}, &corev1.Secret{}); err != nil {
		t.Errorf("the owner's registration of to-x is gone: %v", err)
	}
}
