package gitopscluster_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// revocationFixture is a principal namespace whose GitOpsClusters' agents have certificates
// recorded the way the signer records them.
type revocationFixture struct {
	t     *testing.T
	ns    string
	ca    *pki.KeyPair
	certs map[string]*x509.Certificate
}

func newRevocationFixture(t *testing.T, ns string) *revocationFixture {
	t.Helper()
	createNamespace(t, ns)
	ca, err := pki.NewCA("revocation-test", 24*time.Hour, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &revocationFixture{t: t, ns: ns, ca: ca, certs: map[string]*x509.Certificate{}}
}

func (f *revocationFixture) store() ledger.Store {
	return ledger.Store{Client: k8s, Reader: k8s, Namespace: f.ns}
}

// issue records an agent certificate for each cluster, owned by GitOpsCluster owner.
func (f *revocationFixture) issue(owner string, clusters ...string) {
	f.t.Helper()
	for _, c := range clusters {
		kp, err := f.ca.IssueClientCert(pkix.Name{CommonName: c}, time.Hour, clock.Now())
		if err != nil {
			f.t.Fatal(err)
		}
		f.certs[c] = kp.Cert
		if err := f.store().Record(context.Background(), c, ledger.Owner{Namespace: f.ns, Name: owner}, kp.Cert, 0, clock.Now()); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *revocationFixture) blocked(cluster string) bool {
	f.t.Helper()
	bl, err := f.store().Blocklist(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	_, ok := bl[pki.Fingerprint(f.certs[cluster])]
	return ok
}

func (f *revocationFixture) secretExists(cluster string) bool {
	f.t.Helper()
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: agentsecret.Name(cluster)}, &corev1.Secret{})
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return err == nil
}

func (f *revocationFixture) ledgerExists(cluster string) bool {
	f.t.Helper()
	cm, _, err := f.store().Read(context.Background(), cluster, clock.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	return cm != nil
}

// selectAll makes a GitOpsCluster g in the fixture's namespace whose Placement p selects
// clusters, and waits for their cluster secrets.
func (f *revocationFixture) selectAll(clusters ...string) {
	f.t.Helper()
	createManagedClusters(f.t, clusters...)
	createPlacement(f.t, f.ns, "p")
	setDecisions(f.t, f.ns, "p", 0, clusters...)
	createGitOpsCluster(f.t, f.ns, "g", "p", withAddress("principal.example.com"))
	f.waitSecrets(clusters...)
}

func (f *revocationFixture) waitSecrets(clusters ...string) {
	f.t.Helper()
	for _, c := range clusters {
		eventually(f.t, "cluster secret of "+c, func() error {
			if !f.secretExists(c) {
				return fmt.Errorf("no cluster secret for %s yet", c)
			}
			return nil
		})
	}
}

func (f *revocationFixture) waitRevoked(cluster string) {
	f.t.Helper()
	eventually(f.t, cluster+" revoked", func() error {
		if !f.blocked(cluster) {
			return fmt.Errorf("%s's certificate is not blocked", cluster)
		}
		if f.ledgerExists(cluster) {
			return fmt.Errorf("%s's ledger still exists", cluster)
		}
		if f.secretExists(cluster) {
			return fmt.Errorf("%s's cluster secret still exists", cluster)
		}
		return nil
	})
}

// neverRevoked watches for d that none of clusters loses its cluster secret or gets blocked.
func (f *revocationFixture) neverRevoked(d time.Duration, clusters ...string) {
	f.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, c := range clusters {
			if f.blocked(c) || !f.secretExists(c) || !f.ledgerExists(c) {
				f.t.Fatalf("the agent of %s was revoked although it is still selected (blocked=%v secret=%v ledger=%v)",
					c, f.blocked(c), f.secretExists(c), f.ledgerExists(c))
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAgentsLeavingThePrincipalAreRevoked: a cluster that leaves the placement is revoked once
// the departure is confirmed (its certificates, including the cluster secret's resource-proxy
// certificate, go on the blocklist; ledger and cluster secret go); a cluster whose new owner
// uses the same principal keeps its certificates; deleting a GitOpsCluster revokes its agents.
func TestAgentsLeavingThePrincipalAreRevoked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "revocation")
	createManagedClusters(t, "rvk-a", "rvk-b", "rvk-c")
	createPlacement(t, f.ns, "first")
	createPlacement(t, f.ns, "second")
	setDecisions(t, f.ns, "first", 0, "rvk-a", "rvk-b", "rvk-c")
	setDecisions(t, f.ns, "second", 0, "rvk-c")
	createGitOpsCluster(t, f.ns, "first", "first", withAddress("principal.example.com"))
	time.Sleep(1100 * time.Millisecond) // "second" must be younger, so "first" owns rvk-c
	createGitOpsCluster(t, f.ns, "second", "second", withAddress("principal.example.com"))
	f.waitSecrets("rvk-a", "rvk-b", "rvk-c")
	f.issue("first", "rvk-a", "rvk-b", "rvk-c")

	// The cluster secret's resource-proxy certificate is short-lived, and revoked with the agent's.
	proxyCert, _ := clusterSecretCert(t, f.ns, "rvk-a")
	if life := proxyCert.NotAfter.Sub(proxyCert.NotBefore); life > config.MaxClusterSecretValidity+time.Hour {
		t.Errorf("resource-proxy certificate lives %s, more than %s", life, config.MaxClusterSecretValidity)
	}

	// rvk-a leaves every placement; rvk-c passes to "second", which uses the same principal.
	setDecisions(t, f.ns, "first", 0, "rvk-b", "rvk-c")
	setDecisions(t, f.ns, "first", 0, "rvk-b")
	f.waitRevoked("rvk-a")
	bl, _ := f.store().Blocklist(ctx)
	if _, ok := bl[pki.Fingerprint(proxyCert)]; !ok {
		t.Error("rvk-a's resource-proxy client certificate was not blocked")
	}
	if f.blocked("rvk-c") || f.blocked("rvk-b") {
		t.Error("a certificate of a cluster that stays on the principal was blocked")
	}
	if !f.ledgerExists("rvk-c") || !f.ledgerExists("rvk-b") {
		t.Error("the ledger of a cluster that stays was deleted")
	}

	// Deleting a GitOpsCluster revokes the agents it owned, with no settle period or brake.
	if err := k8s.Delete(ctx, &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "first"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rvk-b revoked on deletion", func() error {
		if !f.blocked("rvk-b") || f.ledgerExists("rvk-b") {
			return fmt.Errorf("rvk-b blocked=%v ledger=%v", f.blocked("rvk-b"), f.ledgerExists("rvk-b"))
		}
		return nil
	})
	if err := k8s.Delete(ctx, &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "second"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rvk-c revoked when its last GitOpsCluster goes", func() error {
		if !f.blocked("rvk-c") {
			return fmt.Errorf("rvk-c is not blocked")
		}
		return nil
	})
}

// TestPagedDecisionRewriteNeverRevokes: OCM moves the last cluster of a full page to the next
// page with two writes; between them the cluster is in no page. That must not revoke it.
func TestPagedDecisionRewriteNeverRevokes(t *testing.T) {
	t.Parallel()
	f := newRevocationFixture(t, "paged-rewrite")
	page0 := []string{"pw-a", "pw-b", "pw-c"}
	createManagedClusters(t, append(page0, "pw-0", "pw-d")...)
	createPlacement(t, f.ns, "p")
	setDecisions(t, f.ns, "p", 0, page0...)
	setDecisions(t, f.ns, "p", 1, "pw-d")
	createGitOpsCluster(t, f.ns, "g", "p", withAddress("principal.example.com"))
	f.waitSecrets("pw-a", "pw-b", "pw-c", "pw-d")
	f.issue("g", "pw-a", "pw-b", "pw-c", "pw-d")

	// pw-0 joins and sorts first: page 0 loses pw-c, page 1 gains it a moment later, as the
	// placement controller writes them (one call per page).
	setDecisions(t, f.ns, "p", 0, "pw-0", "pw-a", "pw-b")
	time.Sleep(departureSettle / 2)
	setDecisions(t, f.ns, "p", 1, "pw-c", "pw-d")
	f.neverRevoked(2*departureSettle, "pw-a", "pw-b", "pw-c", "pw-d")
	f.waitSecrets("pw-0")
}

// TestPlacementWithoutDecisionsRevokesNothing: a Placement that has no PlacementDecision (being
// re-created) or is being deleted reads as "unknown", not "selects nothing".
func TestPlacementWithoutDecisionsRevokesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "nodecisions")
	f.selectAll("nd-a", "nd-b")
	f.issue("g", "nd-a", "nd-b")

	// The decisions go (kubectl replace --force of the Placement: a new one, not scheduled yet).
	if err := k8s.DeleteAllOf(ctx, &clusterv1beta1.PlacementDecision{}, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	conditionIs(t, f.ns, "g", v1alpha1.ConditionRevocationPaused, metav1.ConditionTrue, v1alpha1.ReasonSelectionUnknown)
	f.neverRevoked(2*departureSettle, "nd-a", "nd-b")

	// A foreground deletion: the Placement is held by a finalizer while its decisions are gone.
	pl := &clusterv1beta1.Placement{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "p"}, pl); err != nil {
		t.Fatal(err)
	}
	pl.Finalizers = append(pl.Finalizers, "example.com/hold")
	if err := k8s.Update(ctx, pl); err != nil {
		t.Fatal(err)
	}
	setDecisions(t, f.ns, "p", 0)
	if err := k8s.Delete(ctx, pl); err != nil {
		t.Fatal(err)
	}
	f.neverRevoked(2*departureSettle, "nd-a", "nd-b")
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "p"}, pl); err != nil {
		t.Fatal(err)
	}
	pl.Finalizers = nil
	if err := k8s.Update(ctx, pl); err != nil {
		t.Fatal(err)
	}
}

// TestCircuitBreakerPausesMassRevocation: removing most of a GitOpsCluster's clusters at once
// pauses with a condition naming the count; approving that count lets it proceed.
func TestCircuitBreakerPausesMassRevocation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "breaker")
	clusters := []string{"cb-a", "cb-b", "cb-c", "cb-d"}
	f.selectAll(clusters...)
	f.issue("g", clusters...)

	setDecisions(t, f.ns, "p", 0, "cb-a")
	g := conditionIs(t, f.ns, "g", v1alpha1.ConditionRevocationPaused, metav1.ConditionTrue, v1alpha1.ReasonTooManyDepartures)
	f.neverRevoked(departureSettle, "cb-b", "cb-c", "cb-d")
	if g.Status.PendingDepartures != 3 {
		t.Errorf("pendingDepartures = %d, want 3", g.Status.PendingDepartures)
	}

	patch := client.MergeFrom(g.DeepCopy())
	if g.Annotations == nil {
		g.Annotations = map[string]string{}
	}
	g.Annotations[v1alpha1.AnnotationApproveRevocation] = "3"
	if err := k8s.Patch(ctx, g, patch); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"cb-b", "cb-c", "cb-d"} {
		f.waitRevoked(c)
	}
	conditionIs(t, f.ns, "g", v1alpha1.ConditionRevocationPaused, metav1.ConditionFalse, "")
	if f.blocked("cb-a") {
		t.Error("the remaining cluster was blocked")
	}
	// The approval covered that pass only: it is taken back.
	eventually(t, "the approval taken back once used", func() error {
		cur := &v1alpha1.GitOpsCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(g), cur); err != nil {
			return err
		}
		if v, ok := cur.Annotations[v1alpha1.AnnotationApproveRevocation]; ok {
			return fmt.Errorf("annotation still %q", v)
		}
		return nil
	})
}

// TestRevocationLastsUntilAPersonLiftsIt: listing a cluster in spec.revokedClusters cuts its
// agent at once and makes an AgentRevocation on the principal. Removing the name, re-creating
// the GitOpsCluster from YAML that never listed it, or a person revoking another cluster
// directly: none of these re-admits a revoked cluster. Deleting the AgentRevocation lifts it
// for a new key only: the certificates revoked for compromise stay blocked.
func TestRevocationLastsUntilAPersonLiftsIt(t *testing.T) {
	ctx := context.Background()
	f := newRevocationFixture(t, "revoke-action")
	f.selectAll("ra-a", "ra-b")
	f.issue("g", "ra-a", "ra-b")
	revokedCert := f.certs["ra-a"]
	stillRevoked := func(what string) {
		t.Helper()
		consistently(t, what, 2*departureSettle, func() error {
			if f.secretExists("ra-a") || !f.blocked("ra-a") {
				return fmt.Errorf("ra-a re-admitted: secret=%v blocked=%v", f.secretExists("ra-a"), f.blocked("ra-a"))
			}
			return nil
		})
	}

	g := getGOC(t, f.ns, "g")
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.RevokedClusters = []string{"ra-a"}
	if err := k8s.Patch(ctx, g, patch); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f.waitRevoked("ra-a")
	if d := time.Since(start); d > departureSettle {
		t.Errorf("a person's revocation took %s; it must not wait for the settle period", d)
	}
	rev := &v1alpha1.AgentRevocation{}
	eventually(t, "the AgentRevocation of ra-a enforced", func() error {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "ra-a"}, rev); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(rev.Status.Conditions, v1alpha1.ConditionEnforced); c == nil || c.Status != metav1.ConditionTrue || rev.Status.BlockedCertificates < 1 {
			return fmt.Errorf("status %+v", rev.Status)
		}
		if n := getGOC(t, f.ns, "g").Status.RevokedAgents; n != 1 {
			return fmt.Errorf("revokedAgents = %d", n)
		}
		return nil
	})
	if got := rev.Annotations[v1alpha1.AnnotationRequestedBy]; got != f.ns+"/g" {
		t.Errorf("requested-by = %q", got)
	}
	f.neverRevoked(departureSettle, "ra-b")

	// Taking the name out of the list does not lift it.
	g = getGOC(t, f.ns, "g")
	patch = client.MergeFrom(g.DeepCopy())
	g.Spec.RevokedClusters = nil
	if err := k8s.Patch(ctx, g, patch); err != nil {
		t.Fatal(err)
	}
	stillRevoked("after spec.revokedClusters was emptied")

	// Nor does re-creating the GitOpsCluster from YAML that never listed it (a GitOps re-apply).
	if err := k8s.Delete(ctx, getGOC(t, f.ns, "g")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "g deleted", func() error {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "g"}, &v1alpha1.GitOpsCluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	createGitOpsCluster(t, f.ns, "g", "p", withAddress("principal.example.com"))
	f.waitSecrets("ra-b")
	stillRevoked("after the GitOpsCluster was re-created")

	// Nor another GitOpsCluster of the principal coming to own the cluster (as when a cluster
	// edits its labels into another Placement).
	createPlacement(t, f.ns, "p2")
	setDecisions(t, f.ns, "p2", 0, "ra-a")
	createGitOpsCluster(t, f.ns, "g2", "p2", withAddress("principal.example.com"))
	setDecisions(t, f.ns, "p", 0, "ra-b")
	stillRevoked("after another GitOpsCluster took the cluster over")
	eventually(t, "g2 counts ra-a as revoked", func() error {
		if n := getGOC(t, f.ns, "g2").Status.RevokedAgents; n != 1 {
			return fmt.Errorf("g2 revokedAgents = %d", n)
		}
		return nil
	})

	// A person revokes ra-b directly, without editing any GitOpsCluster.
	f.issue("g", "ra-b")
	if err := k8s.Create(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "ra-b"},
		Spec: v1alpha1.AgentRevocationSpec{Reason: "incident 42"}}); err != nil {
		t.Fatal(err)
	}
	f.waitRevoked("ra-b")

	// Lift ra-a: it is registered again, but its revoked certificate stays blocked.
	if err := k8s.Delete(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "ra-a"}}); err != nil {
		t.Fatal(err)
	}
	f.waitSecrets("ra-a")
	eventually(t, "the AgentRevocation of ra-a gone", func() error {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "ra-a"}, &v1alpha1.AgentRevocation{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	bl, err := f.store().Blocklist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bl[pki.Fingerprint(revokedCert)]; !ok {
		t.Error("lifting the revocation unblocked the certificate revoked for compromise")
	}
	if f.secretExists("ra-b") {
		t.Error("the lift of ra-a re-admitted ra-b")
	}
}

// TestFreshLedgerOfADepartedClusterIsRevoked: a certificate recorded after the cluster's
// revocation (a signer racing with it) makes a new ledger; the next pass revokes it.
func TestFreshLedgerOfADepartedClusterIsRevoked(t *testing.T) {
	t.Parallel()
	f := newRevocationFixture(t, "race")
	f.selectAll("rc-a", "rc-b", "rc-c")
	f.issue("g", "rc-a")
	setDecisions(t, f.ns, "p", 0, "rc-b", "rc-c")
	f.waitRevoked("rc-a")

	f.issue("g", "rc-a") // recorded after the revocation
	eventually(t, "the late certificate revoked", func() error {
		if !f.blocked("rc-a") || f.ledgerExists("rc-a") {
			return fmt.Errorf("late certificate blocked=%v, ledger=%v", f.blocked("rc-a"), f.ledgerExists("rc-a"))
		}
		return nil
	})
}

// TestCertificatesOfKeptClustersWakeNoPass: the signer records every certificate it issues,
// and a record for a cluster its GitOpsCluster keeps gives the pass nothing to do, so a
// renewal wave wakes no pass (a record for a departed cluster still wakes one:
// TestFreshLedgerOfADepartedClusterIsRevoked).
func TestCertificatesOfKeptClustersWakeNoPass(t *testing.T) {
	f := newRevocationFixture(t, "ledger-wakes")
	f.selectAll("lw-a", "lw-b", "lw-c")
	f.issue("g", "lw-a", "lw-b", "lw-c")
	count := func() int { return reconciles.get("gitopscluster", f.ns, "g") }
	// Quiet for longer than ledger writes wait before they wake a pass.
	waitSettled(t, count, gitopscluster.LedgerSettle+time.Second)
	before := count()
	f.issue("g", "lw-a", "lw-b", "lw-c") // renewals
	time.Sleep(gitopscluster.LedgerSettle + 2*time.Second)
	if got := count() - before; got != 0 {
		t.Fatalf("%d pass(es) after certificates were recorded for kept clusters, want none", got)
	}
	f.neverRevoked(200*time.Millisecond, "lw-a", "lw-b", "lw-c")
}

// TestLedgerSurvivesTheClusterNamespace: the records live in the principal namespace, so a
// detached cluster (OCM deletes its hub namespace) is still revoked.
func TestLedgerSurvivesTheClusterNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "ledger-home")
	f.selectAll("lh-a", "lh-b", "lh-c")
	f.issue("g", "lh-a")
	if err := k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lh-a"}}); err != nil {
		t.Fatal(err)
	}
	setDecisions(t, f.ns, "p", 0, "lh-b", "lh-c")
	f.waitRevoked("lh-a")
}

// TestSignerExclusiveWarnsWhenOCMCanReadTheCA: a grant letting OCM's addon-manager read the hub
// CA is reported on the GitOpsCluster.
func TestSignerExclusiveWarnsWhenOCMCanReadTheCA(t *testing.T) {
	ctx := context.Background()
	const ns = "exclusive"
	createNamespace(t, ns)
	createManagedClusters(t, "ex-a")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 0, "ex-a")
	createGitOpsCluster(t, ns, "g", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "g", v1alpha1.ConditionSignerExclusive, metav1.ConditionTrue, v1alpha1.ReasonCANotReadableByOCM)

	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ocm-reads-ca"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ocm-reads-ca"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ocm-reads-ca"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "open-cluster-management-hub", Name: "addon-manager-controller-sa"}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The answer is cached per principal; a new manager asks again.
	stopManager()
	startManager()
	touch(t, ns, "g")
	conditionIs(t, ns, "g", v1alpha1.ConditionSignerExclusive, metav1.ConditionFalse, v1alpha1.ReasonCAReadableByOCM)
}

// touch changes a label so that the GitOpsCluster is reconciled now.
func touch(t *testing.T, ns, name string) {
	t.Helper()
	g := getGOC(t, ns, name)
	patch := client.MergeFrom(g.DeepCopy())
	if g.Labels == nil {
		g.Labels = map[string]string{}
	}
	g.Labels["test/touched"] = fmt.Sprint(time.Now().UnixNano())
	if err := k8s.Patch(context.Background(), g, patch); err != nil {
		t.Fatal(err)
	}
}

// TestPrincipalNamespaceMustAllowTheGitOpsCluster: a GitOpsCluster may not issue from, or add
// names to, another namespace's principal unless that namespace lists it.
func TestPrincipalNamespaceMustAllowTheGitOpsCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	createNamespace(t, "tenant-a")
	createNamespace(t, "platform-principal")
	createManagedClusters(t, "pn-a")
	createPlacement(t, "tenant-a", "p")
	setDecisions(t, "tenant-a", "p", 0, "pn-a")
	createGitOpsCluster(t, "tenant-a", "g", "p", withAddress("evil.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.PrincipalNamespace = "platform-principal"
	})
	conditionIs(t, "tenant-a", "g", v1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, v1alpha1.ReasonPrincipalNotAllowed)
	err := k8s.Get(ctx, types.NamespacedName{Namespace: "platform-principal", Name: names.CASecretName}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the manager wrote PKI into a principal namespace the GitOpsCluster may not use (err %v)", err)
	}

	ns := &corev1.Namespace{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: "platform-principal"}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Annotations = map[string]string{v1alpha1.AnnotationAllowedGitOpsClusterNamespaces: "other, tenant-a"}
	if err := k8s.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	touch(t, "tenant-a", "g")
	conditionIs(t, "tenant-a", "g", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, "")
}

// TestForeignLedgerConfigMapsAreIgnored: a ConfigMap named like the certificate ledger of an
// earlier layout, put by anyone in a namespace they may write (a tenant's, a cluster's), with
// the fingerprint of a live agent's certificate and an expiry far off, never reaches a
// principal: after a manager restart and later passes the live agent is not blocked, and the
// ConfigMap is left as it was.
func TestForeignLedgerConfigMapsAreIgnored(t *testing.T) {
	ctx := context.Background()
	f := newRevocationFixture(t, "foreign-ledger")
	f.selectAll("fl-a", "fl-b")
	f.issue("g", "fl-a", "fl-b")

	createNamespace(t, "fl-tenant")
	planted := map[string]*corev1.ConfigMap{}
	for _, ns := range []string{"fl-tenant", "fl-a"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-issued-certificates"},
			Data: map[string]string{pki.Fingerprint(f.certs["fl-a"]): "2099-01-01T00:00:00Z"}}
		if err := k8s.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		planted[ns] = cm
	}
	stopManager()
	startManagerOn(env.Config, nil)
	// Passes after the restart: fl-b leaves and is revoked.
	setDecisions(t, f.ns, "p", 0, "fl-a")
	f.waitRevoked("fl-b")
	if f.blocked("fl-a") {
		t.Fatal("a live agent was blocked on the word of a ConfigMap outside the principal namespace")
	}
	for ns, cm := range planted {
		cur := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(cm), cur); err != nil {
			t.Errorf("the ConfigMap in %s was touched: %v", ns, err)
		}
	}
	for _, name := range []string{"fl-tenant", "fl-a"} {
		if cm, _, err := f.store().Read(ctx, name, clock.Now()); err != nil || (name == "fl-tenant" && cm != nil) {
			t.Errorf("a ledger for %q in the principal namespace (%v, %v)", name, cm != nil, err)
		}
	}
}

// TestUnregistrationNeverWaitsForBlocklistRoom: with the principal's blocklist full, a cluster
// that leaves is still unregistered (its cluster secret goes, so argocd-agent drops it), its
// ledger is kept, and BlocklistHasRoom says why; once there is room the next pass blocks it.
func TestUnregistrationNeverWaitsForBlocklistRoom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "full-blocklist")
	f.selectAll("fb-a", "fb-b")
	f.issue("g", "fb-a", "fb-b")
	conditionIs(t, f.ns, "g", v1alpha1.ConditionBlocklistHasRoom, metav1.ConditionTrue, v1alpha1.ReasonBlocklistWithinCapacity)

	// A person's keys fill the blocklist to its budget.
	var filler []string
	for i := range ledger.BlocklistBudget / 70 {
		filler = append(filler, fmt.Sprintf("%X", sha256.Sum256(fmt.Appendf(nil, "filler-%d", i))))
	}
	if _, err := f.store().Reassert(ctx, filler); err != nil {
		t.Fatal(err)
	}

	setDecisions(t, f.ns, "p", 0, "fb-b")
	eventually(t, "fb-a unregistered although it cannot be blocked", func() error {
		if f.secretExists("fb-a") {
			return fmt.Errorf("fb-a's cluster secret still exists")
		}
		return nil
	})
	conditionIs(t, f.ns, "g", v1alpha1.ConditionBlocklistHasRoom, metav1.ConditionFalse, v1alpha1.ReasonBlocklistFull)
	// The passes between two retries of the block retry nothing: the report stays Full.
	consistently(t, "BlocklistHasRoom stays Full while fb-a's block waits", 2*departureSettle+time.Second, func() error {
		if c := meta.FindStatusCondition(getGOC(t, f.ns, "g").Status.Conditions, v1alpha1.ConditionBlocklistHasRoom); c == nil || c.Reason != v1alpha1.ReasonBlocklistFull {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	if f.blocked("fb-a") || !f.ledgerExists("fb-a") {
		t.Fatalf("fb-a blocked=%v ledger=%v; want its ledger kept for a later pass", f.blocked("fb-a"), f.ledgerExists("fb-a"))
	}

	// Room again: the person removes their keys; the next pass blocks fb-a.
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: ledger.BlocklistName}, cm); err != nil {
		t.Fatal(err)
	}
	for _, fp := range filler {
		delete(cm.Data, fp)
	}
	if err := k8s.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	touch(t, f.ns, "g")
	f.waitRevoked("fb-a")
	conditionIs(t, f.ns, "g", v1alpha1.ConditionBlocklistHasRoom, metav1.ConditionTrue, v1alpha1.ReasonBlocklistWithinCapacity)
}

// TestRevocationsComeBackOnTheBlocklist: a revoked certificate's key removed from the
// blocklist (by hand, or lost between two writes) is put back at once, because the revocation
// record still holds it, with an Event on the blocklist. An ordinary revocation, whose record
// shards are written before its blocklist (each write waking the keeper), restores nothing.
func TestRevocationsComeBackOnTheBlocklist(t *testing.T) {
	ctx := context.Background()
	f := newRevocationFixture(t, "reassert")
	f.selectAll("rb-a", "rb-b", "rb-c", "rb-d", "rb-e", "rb-f", "rb-g")
	f.issue("g", "rb-a", "rb-b", "rb-c", "rb-d", "rb-e", "rb-f", "rb-g")
	restoredEvents := func() (int, error) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
			return 0, err
		}
		n := 0
		for _, e := range list.Items {
			if e.Regarding.Kind == "ConfigMap" && e.Regarding.Name == ledger.BlocklistName && e.Reason == "BlocklistRestored" {
				n++
			}
		}
		return n, nil
	}
	// Three clusters leave at once (under the circuit breaker's half): their keys fall in
	// several record shards.
	setDecisions(t, f.ns, "p", 0, "rb-b", "rb-e", "rb-f", "rb-g")
	for _, c := range []string{"rb-a", "rb-c", "rb-d"} {
		f.waitRevoked(c)
	}
	// Longer than the keeper waits before it puts a key back.
	time.Sleep(5 * time.Second)
	if n, err := restoredEvents(); err != nil || n != 0 {
		t.Fatalf("an ordinary revocation was reported as %d BlocklistRestored Event(s) (%v)", n, err)
	}

	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: ledger.BlocklistName}, cm); err != nil {
		t.Fatal(err)
	}
	delete(cm.Data, pki.Fingerprint(f.certs["rb-a"]))
	if err := k8s.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// Nothing else happens: the blocklist's own change brings the key back, not a later pass
	// of some GitOpsCluster (which an idle fleet may not run for days).
	eventually(t, "rb-a's key back on the blocklist", func() error {
		if !f.blocked("rb-a") {
			return fmt.Errorf("not blocked")
		}
		return nil
	})
	eventually(t, "a BlocklistRestored Event on the blocklist", func() error {
		if n, err := restoredEvents(); err != nil || n == 0 {
			return fmt.Errorf("none (%v)", err)
		}
		return nil
	})
}

// TestClusterSecretDeletedByHandStaysRevocable: the resource-proxy certificate of a cluster
// secret someone deletes is recorded in the cluster's ledger before the secret goes, so a later
// revocation blocks it although no secret holds it any more.
func TestClusterSecretDeletedByHandStaysRevocable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "hand-deleted")
	f.selectAll("hd-a")
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: agentsecret.Name("hd-a")}, s); err != nil {
		t.Fatal(err)
	}
	first := agentsecret.Certificate(s)
	if first == nil {
		t.Fatal("the cluster secret holds no certificate")
	}
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted secret's certificate recorded and a new secret written", func() error {
		_, entries, err := f.store().Read(ctx, "hd-a", clock.Now())
		if err != nil {
			return err
		}
		if _, ok := entries[pki.Fingerprint(first)]; !ok {
			return fmt.Errorf("the ledger lacks the deleted secret's certificate: %v", entries)
		}
		cur := &corev1.Secret{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: agentsecret.Name("hd-a")}, cur); err != nil {
			return err
		}
		if c := agentsecret.Certificate(cur); c == nil || c.Equal(first) || !cur.DeletionTimestamp.IsZero() {
			return fmt.Errorf("no new cluster secret yet")
		}
		return nil
	})
	f.certs["hd-a"] = first
	if err := k8s.Create(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "hd-a"}}); err != nil {
		t.Fatal(err)
	}
	f.waitRevoked("hd-a")
}

// TestClusterSecretsOfAnEarlierReleaseGetTheFinalizerOnly: a current cluster secret without the
// certificate-record finalizer (written by an earlier release) gets it, and keeps its
// certificate: an upgrade re-issues nothing.
func TestClusterSecretsOfAnEarlierReleaseGetTheFinalizerOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "finalizer-upgrade")
	f.selectAll("fu-a")
	key := types.NamespacedName{Namespace: f.ns, Name: agentsecret.Name("fu-a")}
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, key, s); err != nil {
		t.Fatal(err)
	}
	cert := agentsecret.Certificate(s)
	s.Finalizers = nil
	if err := k8s.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	touch(t, f.ns, "g")
	eventually(t, "the finalizer added back, the certificate kept", func() error {
		cur := &corev1.Secret{}
		if err := k8s.Get(ctx, key, cur); err != nil {
			return err
		}
		if !controllerutil.ContainsFinalizer(cur, v1alpha1.FinalizerRecordCertificate) {
			return fmt.Errorf("no finalizer yet")
		}
		if c := agentsecret.Certificate(cur); c == nil || !c.Equal(cert) {
			return fmt.Errorf("the certificate was re-issued")
		}
		return nil
	})
}

// TestSpecRevocationOnlyForOwnClusters: spec.revokedClusters makes a lasting AgentRevocation
// only for a cluster the GitOpsCluster owns; naming a cluster whose ledger has no live owner
// (it left another GitOpsCluster of the principal) makes none.
func TestSpecRevocationOnlyForOwnClusters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "own-only")
	f.selectAll("oo-a")
	f.issue("g", "oo-a")
	f.issue("", "oo-x") // an ownerless ledger
	g := getGOC(t, f.ns, "g")
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.RevokedClusters = []string{"oo-a", "oo-x"}
	if err := k8s.Patch(ctx, g, patch); err != nil {
		t.Fatal(err)
	}
	f.waitRevoked("oo-a")
	eventually(t, "the AgentRevocation of oo-a", func() error {
		return k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "oo-a"}, &v1alpha1.AgentRevocation{})
	})
	consistently(t, "no AgentRevocation for a cluster g does not own", 2*time.Second, func() error {
		err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "oo-x"}, &v1alpha1.AgentRevocation{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("AgentRevocation oo-x: %v", err)
		}
		return nil
	})
}

// TestGitOpsClusterNotAllowedOnAPrincipalDecidesNothingThere: a tenant's GitOpsCluster that
// names another namespace's principal, which does not allow it, is older than the principal's
// own GitOpsCluster and asks for cert-manager and another address: it is refused, and it neither
// sets the principal's PKI (no PKIConflict for the allowed one) nor adds its address to the
// principal's serving certificate.
func TestGitOpsClusterNotAllowedOnAPrincipalDecidesNothingThere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	createNamespace(t, "na-principal")
	createNamespace(t, "na-tenant")
	ns := &corev1.Namespace{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: "na-principal"}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Annotations = map[string]string{v1alpha1.AnnotationAllowedGitOpsClusterNamespaces: "na-team"}
	if err := k8s.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, "na-team")
	createPlacement(t, "na-tenant", "p")
	setDecisions(t, "na-tenant", "p", 0)
	createPlacement(t, "na-team", "p")
	setDecisions(t, "na-team", "p", 0)
	onPrincipal := func(g *v1alpha1.GitOpsCluster) { g.Spec.ArgoCDAgentAddon.PrincipalNamespace = "na-principal" }

	createGitOpsCluster(t, "na-tenant", "g", "p", onPrincipal, withAddress("evil.example.com"), withIssuer("evil-ca"))
	conditionIs(t, "na-tenant", "g", v1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, v1alpha1.ReasonPrincipalNotAllowed)
	// Equal creation seconds are ordered by namespace: the tenant stays the older one.
	createGitOpsCluster(t, "na-team", "g", "p", onPrincipal, withAddress("principal.example.com"))
	conditionIs(t, "na-team", "g", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonCertificatesIssued)
	// A younger tenant that does not ask for another PKI, only for its address on the
	// principal's certificate.
	createNamespace(t, "na-tenant2")
	createPlacement(t, "na-tenant2", "p")
	setDecisions(t, "na-tenant2", "p", 0)
	createGitOpsCluster(t, "na-tenant2", "g", "p", onPrincipal, withAddress("evil2.example.com"))
	conditionIs(t, "na-tenant2", "g", v1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, v1alpha1.ReasonPrincipalNotAllowed)
	touch(t, "na-team", "g")
	// The team's pass after the touch has run once its status shows the touch's generation.
	conditionIs(t, "na-team", "g", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonCertificatesIssued)
	time.Sleep(2 * time.Second)
	leaf := leafOf(t, getSecret(t, "na-principal", names.PrincipalTLSSecretName))
	if !slices.Contains(leaf.DNSNames, "principal.example.com") || slices.Contains(leaf.DNSNames, "evil.example.com") || slices.Contains(leaf.DNSNames, "evil2.example.com") {
		t.Errorf("the principal's serving certificate names %v", leaf.DNSNames)
	}
}

// TestDeletionWithAFullBlocklistUnregistersEveryAgent: a GitOpsCluster deleted while its
// principal's blocklist has no room still unregisters every agent (their cluster secrets go,
// so argocd-agent drops them); only their ledgers wait for room.
func TestDeletionWithAFullBlocklistUnregistersEveryAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "full-deletion")
	clusters := []string{"fd-a", "fd-b", "fd-c"}
	f.selectAll(clusters...)
	f.issue("g", clusters...)
	var filler []string
	for i := range ledger.BlocklistBudget / 70 {
		filler = append(filler, fmt.Sprintf("%X", sha256.Sum256(fmt.Appendf(nil, "filler-%d", i))))
	}
	if _, err := f.store().Reassert(ctx, filler); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "g"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the GitOpsCluster gone", func() error {
		err := k8s.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "g"}, &v1alpha1.GitOpsCluster{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	for _, c := range clusters {
		if f.secretExists(c) {
			t.Errorf("%s's cluster secret outlived its GitOpsCluster", c)
		}
		if !f.ledgerExists(c) {
			t.Errorf("%s's ledger is gone although its certificates could not be blocked", c)
		}
	}
}

// TestDeletionLeavesNoLedgers: a deleted GitOpsCluster's agents are blocked and their ledgers
// deleted, and nothing brings a ledger back once their cluster secrets are gone: a secret's
// last certificate, already blocked, is not recorded again in a new ledger that no
// GitOpsCluster would ever revoke.
func TestDeletionLeavesNoLedgers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newRevocationFixture(t, "clean-deletion")
	var clusters []string
	for i := range 24 {
		clusters = append(clusters, fmt.Sprintf("cd-%02d", i))
	}
	f.selectAll(clusters...)
	f.issue("g", clusters...)
	if err := k8s.Delete(ctx, &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "g"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every cluster secret gone", func() error {
		var secrets corev1.SecretList
		if err := k8s.List(ctx, &secrets, client.InNamespace(f.ns), client.HasLabels{v1alpha1.LabelAgentName}); err != nil {
			return err
		}
		if len(secrets.Items) > 0 {
			return fmt.Errorf("%d left", len(secrets.Items))
		}
		return nil
	})
	// Long enough for anything woken by the secrets' deletion to have written.
	time.Sleep(3 * time.Second)
	var ledgers corev1.ConfigMapList
	if err := k8s.List(ctx, &ledgers, client.InNamespace(f.ns), client.MatchingLabels{ledger.LabelRecord: ledger.RecordLedger}); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, cm := range ledgers.Items {
		left = append(left, cm.Name)
	}
	if len(left) > 0 {
		t.Errorf("%d ledger(s) outlived the GitOpsCluster, with no owner left to revoke them: %v", len(left), left)
	}
	for _, c := range clusters {
		if !f.blocked(c) {
			t.Errorf("%s's certificate is not blocked", c)
		}
	}
}
