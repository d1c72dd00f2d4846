package gitopscluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// agentCSR asks for cluster's agent certificate as its registration agent does, and returns
// the request once the signer has answered: its certificate, or the reason it was refused.
func agentCSR(t *testing.T, cluster string) (signed bool, reason string) {
	t.Helper()
	ctx := context.Background()
	if err := testenv.GrantCSRCreate(ctx, k8s, cluster); err != nil {
		t.Fatal(err)
	}
	csr, err := testenv.AgentCSR(cluster, cluster, addon.DefaultAddonName, addon.DefaultSignerName)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := client.New(testenv.Agent(cluster).Impersonating(env.Config), client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Create(ctx, csr); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the signer's answer to "+cluster+"'s request", func() error {
		got := &certificatesv1.CertificateSigningRequest{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: csr.Name}, got); err != nil {
			return err
		}
		if len(got.Status.Certificate) > 0 {
			signed = true
			return nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == certificatesv1.CertificateFailed {
				reason = c.Reason
				return nil
			}
		}
		return fmt.Errorf("not answered yet: %+v", got.Status.Conditions)
	})
	return signed, reason
}

// TestRevocationHoldsOnEveryPrincipal: two principals, each with a GitOpsCluster selecting
// cluster xp-x; the older one, on the second principal, owns it and has registered it there.
// An AgentRevocation on the first principal cuts it off the second too: its cluster secret
// there goes, the certificate recorded there is blocked there, the signer refuses its
// requests, and no principal registers it while the revocation holds. Revoked on both
// principals, it stays revoked until both revocations are lifted; the last lift re-admits the
// cluster on both: on the second, and on the first once the first's GitOpsCluster owns it.
// Revoked again where it is registered, the cluster that labels itself into the other
// principal's Placement is not taken in there.
func TestRevocationHoldsOnEveryPrincipal(t *testing.T) {
	ctx := context.Background()
	one := newRevocationFixture(t, "xp-one")
	two := newRevocationFixture(t, "xp-two")
	createManagedClusters(t, "xp-x", "xp-a", "xp-b")
	createPlacement(t, two.ns, "p")
	setDecisions(t, two.ns, "p", 0, "xp-b", "xp-x")
	createGitOpsCluster(t, two.ns, "g", "p", withAddress("two.example.com"))
	two.waitSecrets("xp-b", "xp-x")
	time.Sleep(1100 * time.Millisecond) // the first principal's GitOpsCluster must be younger
	createPlacement(t, one.ns, "p")
	setDecisions(t, one.ns, "p", 0, "xp-a", "xp-x")
	createGitOpsCluster(t, one.ns, "g", "p", withAddress("one.example.com"))
	one.waitSecrets("xp-a")
	two.issue("g", "xp-x", "xp-b")
	if one.secretExists("xp-x") {
		t.Fatal("xp-x is registered on both principals")
	}
	if signed, reason := agentCSR(t, "xp-x"); !signed {
		t.Fatalf("xp-x's request was refused (%s) before any revocation", reason)
	}

	if err := k8s.Create(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: one.ns, Name: "xp-x"},
		Spec: v1alpha1.AgentRevocationSpec{Reason: "INC-7: credentials leaked"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "xp-x cut off the second principal", func() error {
		if two.secretExists("xp-x") {
			return fmt.Errorf("its cluster secret is still on the second principal")
		}
		if !two.blocked("xp-x") {
			return fmt.Errorf("its certificate recorded on the second principal is not blocked there")
		}
		return nil
	})
	eventually(t, "the AgentRevocation enforced", func() error {
		rev := &v1alpha1.AgentRevocation{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: one.ns, Name: "xp-x"}, rev); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(rev.Status.Conditions, v1alpha1.ConditionEnforced); c == nil || c.Status != metav1.ConditionTrue || rev.Status.BlockedCertificates < 1 {
			return fmt.Errorf("status %+v", rev.Status)
		}
		return nil
	})
	if signed, reason := agentCSR(t, "xp-x"); signed || reason != signer.ReasonRevoked {
		t.Fatalf("xp-x's request while revoked: signed %v, reason %q; want refused as %s", signed, reason, signer.ReasonRevoked)
	}
	consistently(t, "no principal registers xp-x while it is revoked", 2*departureSettle, func() error {
		if one.secretExists("xp-x") || two.secretExists("xp-x") {
			return fmt.Errorf("registered: first %v, second %v", one.secretExists("xp-x"), two.secretExists("xp-x"))
		}
		if !two.secretExists("xp-b") || !one.secretExists("xp-a") {
			return fmt.Errorf("another cluster lost its registration")
		}
		return nil
	})

	// Revoked on both principals, the cluster is re-admitted only once both are lifted.
	if err := k8s.Create(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: two.ns, Name: "xp-x"}}); err != nil {
		t.Fatal(err)
	}
	lift := func(ns string) {
		t.Helper()
		if err := k8s.Delete(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "xp-x"}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the AgentRevocation in "+ns+" gone", func() error {
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "xp-x"}, &v1alpha1.AgentRevocation{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	}
	lift(one.ns)
	consistently(t, "xp-x still revoked by the second principal's AgentRevocation", 2*departureSettle, func() error {
		if one.secretExists("xp-x") || two.secretExists("xp-x") {
			return fmt.Errorf("registered: first %v, second %v", one.secretExists("xp-x"), two.secretExists("xp-x"))
		}
		return nil
	})
	if signed, reason := agentCSR(t, "xp-x"); signed || reason != signer.ReasonRevoked {
		t.Fatalf("xp-x's request with one of two revocations lifted: signed %v, reason %q", signed, reason)
	}

	// The last lift: re-admitted where its owner is, with a new key.
	lift(two.ns)
	two.waitSecrets("xp-x")
	if signed, reason := agentCSR(t, "xp-x"); !signed {
		t.Fatalf("xp-x's request after the lift was refused (%s)", reason)
	}
	// And on the first principal, once its GitOpsCluster owns the cluster.
	setDecisions(t, two.ns, "p", 0, "xp-b")
	one.waitSecrets("xp-x")
	if signed, reason := agentCSR(t, "xp-x"); !signed {
		t.Fatalf("xp-x's request on the first principal was refused (%s)", reason)
	}

	// Revoked where it is registered, the cluster labels itself into the other principal's
	// Placement and out of its own: the other principal does not take it in.
	if err := k8s.Create(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: one.ns, Name: "xp-x"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "xp-x cut off both principals", func() error {
		if one.secretExists("xp-x") || two.secretExists("xp-x") {
			return fmt.Errorf("registered: first %v, second %v", one.secretExists("xp-x"), two.secretExists("xp-x"))
		}
		return nil
	})
	setDecisions(t, two.ns, "p", 0, "xp-b", "xp-x")
	setDecisions(t, one.ns, "p", 0, "xp-a")
	consistently(t, "the second principal does not take the revoked cluster in", 2*departureSettle, func() error {
		if two.secretExists("xp-x") || one.secretExists("xp-x") {
			return fmt.Errorf("registered: first %v, second %v", one.secretExists("xp-x"), two.secretExists("xp-x"))
		}
		return nil
	})
	if signed, reason := agentCSR(t, "xp-x"); signed || reason != signer.ReasonRevoked {
		t.Fatalf("xp-x's request on the second principal while revoked on the first: signed %v, reason %q", signed, reason)
	}
}
