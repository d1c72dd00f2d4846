package signer_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
)

func leaf(t *testing.T, ca *pki.KeyPair, cn string, validity time.Duration, now time.Time) *x509.Certificate {
	t.Helper()
	kp, err := ca.IssueClientCert(pkix.Name{CommonName: cn}, validity, now)
	if err != nil {
		t.Fatal(err)
	}
	return kp.Cert
}

func getCM(t *testing.T, c client.Client, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return cm
}

func TestRevokeAndPruneBlocklist(t *testing.T) {
	h := hub(t)
	c := h.admin
	ctx := context.Background()
	const pns = "revoke-principal"
	for _, ns := range []string{pns, "rv1", "rv2"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().Truncate(time.Second)
	ca, err := pki.NewCA("revoke-test-ca", 30*24*time.Hour, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	long := leaf(t, ca, "rv1-long", 3*time.Hour, now)   // still valid after the prune below
	short := leaf(t, ca, "rv1-short", time.Hour, now)   // expired at the prune below
	other := leaf(t, ca, "rv2", 3*time.Hour, now)       // another cluster: not revoked
	later := leaf(t, ca, "rv1-later", 3*time.Hour, now) // issued after the revocation

	// An expired entry and a foreign key are dropped from a ledger on the next write.
	if err := c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "rv1", Name: signer.LedgerName},
		Data: map[string]string{
			"0000000000000000000000000000000000000000000000000000000000000000": now.Add(-time.Minute).UTC().Format(time.RFC3339),
			"not-a-fingerprint": now.Add(time.Hour).UTC().Format(time.RFC3339),
		},
	}); err != nil {
		t.Fatal(err)
	}
	// Concurrent writers to one ledger lose nothing (retry on conflict).
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, cert := range []*x509.Certificate{long, short} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- signer.RecordIssued(ctx, c, "rv1", cert, now)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := signer.RecordIssued(ctx, c, "rv2", other, now); err != nil {
		t.Fatal(err)
	}
	l1 := getCM(t, c, "rv1", signer.LedgerName)
	wantLedger := map[string]string{
		pki.Fingerprint(long):  long.NotAfter.UTC().Format(time.RFC3339),
		pki.Fingerprint(short): short.NotAfter.UTC().Format(time.RFC3339),
	}
	if !mapsEqual(l1.Data, wantLedger) {
		t.Fatalf("ledger of rv1 = %v, want %v", l1.Data, wantLedger)
	}

	// A key a person put on the blocklist stays there.
	const manual = "ABCDEF0000000000000000000000000000000000000000000000000000000000"
	if err := c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: pns, Name: signer.BlocklistName},
		Data:       map[string]string{manual: ""},
	}); err != nil {
		t.Fatal(err)
	}

	if err := signer.Revoke(ctx, c, pns, []string{"rv1", "ghost", "rv1"}, now); err != nil {
		t.Fatal(err)
	}
	bl := getCM(t, c, pns, signer.BlocklistName)
	wantBlocked := map[string]string{pki.Fingerprint(long): "", pki.Fingerprint(short): "", manual: ""}
	if !mapsEqual(bl.Data, wantBlocked) {
		t.Fatalf("blocklist = %v, want %v", bl.Data, wantBlocked)
	}
	expiry, err := signer.BlocklistExpiry(bl)
	if err != nil {
		t.Fatal(err)
	}
	if len(expiry) != 2 || !expiry[pki.Fingerprint(long)].Equal(long.NotAfter) || !expiry[pki.Fingerprint(short)].Equal(short.NotAfter) {
		t.Fatalf("expiry record %v", bl.Annotations[signer.AnnotationBlocklistExpiry])
	}
	var raw map[string]string
	if err := json.Unmarshal([]byte(bl.Annotations[signer.AnnotationBlocklistExpiry]), &raw); err != nil {
		t.Fatalf("expiry annotation is not JSON: %v", err)
	}
	if getCM(t, c, "rv1", signer.LedgerName) != nil {
		t.Error("the revoked cluster's ledger still exists")
	}
	if l2 := getCM(t, c, "rv2", signer.LedgerName); l2 == nil || len(l2.Data) != 1 {
		t.Errorf("another cluster's ledger was touched: %v", l2)
	}

	// Idempotent: revoking again writes nothing.
	rv := bl.ResourceVersion
	if err := signer.Revoke(ctx, c, pns, []string{"rv1"}, now); err != nil {
		t.Fatal(err)
	}
	if got := getCM(t, c, pns, signer.BlocklistName).ResourceVersion; got != rv {
		t.Errorf("revoking again rewrote the blocklist (%s -> %s)", rv, got)
	}

	// The cluster comes back: its new certificate starts a fresh ledger and is not blocked.
	if err := signer.RecordIssued(ctx, c, "rv1", later, now); err != nil {
		t.Fatal(err)
	}
	if l := getCM(t, c, "rv1", signer.LedgerName); len(l.Data) != 1 {
		t.Errorf("the returning cluster's ledger = %v, want only its new certificate", l.Data)
	}
	if _, blocked := getCM(t, c, pns, signer.BlocklistName).Data[pki.Fingerprint(later)]; blocked {
		t.Error("the returning cluster's new certificate is blocked")
	}

	// Pruning writes only when something expired, and then drops exactly the expired keys.
	if err := signer.PruneBlocklist(ctx, c, pns, now); err != nil {
		t.Fatal(err)
	}
	if got := getCM(t, c, pns, signer.BlocklistName).ResourceVersion; got != rv {
		t.Errorf("a prune with nothing expired wrote the blocklist (%s -> %s)", rv, got)
	}
	if err := signer.PruneBlocklist(ctx, c, pns, now.Add(90*time.Minute)); err != nil {
		t.Fatal(err)
	}
	bl = getCM(t, c, pns, signer.BlocklistName)
	wantBlocked = map[string]string{pki.Fingerprint(long): "", manual: ""}
	if !mapsEqual(bl.Data, wantBlocked) {
		t.Fatalf("after the prune: blocklist = %v, want %v", bl.Data, wantBlocked)
	}
	if expiry, _ := signer.BlocklistExpiry(bl); len(expiry) != 1 {
		t.Errorf("after the prune: expiry record %v", expiry)
	}
	if err := signer.PruneBlocklist(ctx, c, pns, now.Add(4*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if bl = getCM(t, c, pns, signer.BlocklistName); !mapsEqual(bl.Data, map[string]string{manual: ""}) {
		t.Errorf("after the last certificate expired: %v", bl.Data)
	}
	// Nothing to do on a principal without a blocklist.
	if err := signer.PruneBlocklist(ctx, c, "no-such-principal", now); err != nil {
		t.Fatal(err)
	}
}

// TestRevokeCreatesTheBlocklist: on a principal without a blocklist, Revoke makes one; a
// cluster without live certificates adds nothing.
func TestRevokeCreatesTheBlocklist(t *testing.T) {
	h := hub(t)
	c := h.admin
	ctx := context.Background()
	for _, ns := range []string{"revoke-principal2", "rv3"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	if err := signer.Revoke(ctx, c, "revoke-principal2", []string{"rv3"}, now); err != nil {
		t.Fatal(err)
	}
	if getCM(t, c, "revoke-principal2", signer.BlocklistName) != nil {
		t.Fatal("an empty revocation created a blocklist")
	}
	cert := leaf(t, h.ca, "rv3", time.Hour, now)
	if err := signer.RecordIssued(ctx, c, "rv3", cert, now); err != nil {
		t.Fatal(err)
	}
	if err := signer.Revoke(ctx, c, "revoke-principal2", []string{"rv3"}, now); err != nil {
		t.Fatal(err)
	}
	bl := getCM(t, c, "revoke-principal2", signer.BlocklistName)
	if bl == nil || !mapsEqual(bl.Data, map[string]string{pki.Fingerprint(cert): ""}) {
		t.Fatalf("blocklist %v", bl)
	}
	if bl.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
		t.Errorf("labels %v", bl.Labels)
	}
}

// TestClustersToRevoke keeps the agents whose owner uses the same principal.
func TestClustersToRevoke(t *testing.T) {
	h := hub(t)
	ctx := context.Background()
	c := h.mgr.GetClient() // carries fleet's indexes
	for _, tc := range []struct {
		principal string
		in, want  []string
	}{
		{principalNS, []string{"cluster1", "lonely", "ghost", "cluster-noca"}, []string{"cluster-noca", "ghost", "lonely"}},
		{"noca-principal", []string{"cluster1", "cluster-noca"}, []string{"cluster1"}},
		{"elsewhere", []string{"cluster1", "", "cluster1"}, []string{"cluster1"}},
	} {
		got, err := signer.ClustersToRevoke(ctx, c, tc.principal, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ClustersToRevoke(%s, %v) = %v, want %v", tc.principal, tc.in, got, tc.want)
		}
	}
}

func mapsEqual(a, b map[string]string) bool { return maps.Equal(a, b) }
