package revocation_test

import (
	"context"
	"crypto/x509/pkix"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/revocation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestUnregisterDeletesOnlyTheSecretItRecorded: a revocation records the certificate of the
// cluster secret it read, then deletes that secret. When the secret was rewritten (a renewed
// certificate) or replaced (a new registration) in between, the certificate the ledger has is
// not the one in the secret: the secret must stay, for the next pass to record and delete, and
// the call must say so. A secret still as it was read is deleted and its certificate recorded.
func TestUnregisterDeletesOnlyTheSecretItRecorded(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true})
	ctx := context.Background()
	const ns = "argocd"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca, err := pki.NewCA("agents", 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	newConfig := func(cluster string) ([]byte, string) {
		kp, err := ca.IssueClientCert(pkix.Name{CommonName: cluster}, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := agentsecret.NewConfig(kp, ca.CertPEM)
		if err != nil {
			t.Fatal(err)
		}
		return cfg, pki.Fingerprint(kp.Cert)
	}
	create := func(cluster string) (*corev1.Secret, string) {
		cfg, fp := newConfig(cluster)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agentsecret.Name(cluster)},
			Data: map[string][]byte{"config": cfg}}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s.DeepCopy(), fp
	}
	hub := config.Hub{Client: env.Client, Reader: env.Client}
	store := revocation.LedgerStore(hub, ns)
	recorded := func(cluster string) ledger.Entries {
		_, entries, err := store.Read(ctx, cluster, now)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return entries
	}
	exists := func(s *corev1.Secret) bool {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	t.Run("rewritten", func(t *testing.T) {
		read, oldFP := create("rewritten")
		live := read.DeepCopy()
		var newFP string
		live.Data["config"], newFP = newConfig("rewritten")
		if err := env.Client.Update(ctx, live); err != nil {
			t.Fatal(err)
		}
		err := revocation.UnregisterForTest(ctx, hub, store, map[string]*corev1.Secret{"rewritten": read}, "rewritten", now)
		if !apierrors.IsConflict(err) {
			t.Fatalf("unregister with a secret rewritten since it was read: %v, want a conflict", err)
		}
		if !exists(live) {
			t.Fatal("the rewritten secret, whose certificate no ledger holds, was deleted")
		}
		entries := recorded("rewritten")
		if _, ok := entries[oldFP]; !ok {
			t.Errorf("the certificate read was not recorded: %v", entries)
		}
		if _, ok := entries[newFP]; ok {
			t.Errorf("the new certificate is recorded before its secret was read")
		}
	})

	t.Run("replaced", func(t *testing.T) {
		read, _ := create("replaced")
		if err := env.Client.Delete(ctx, read); err != nil {
			t.Fatal(err)
		}
		replacement, _ := create("replaced")
		err := revocation.UnregisterForTest(ctx, hub, store, map[string]*corev1.Secret{"replaced": read}, "replaced", now)
		if !apierrors.IsConflict(err) {
			t.Fatalf("unregister with a secret replaced since it was read: %v, want a conflict", err)
		}
		if !exists(replacement) {
			t.Fatal("the replacement secret was deleted")
		}
	})

	t.Run("as read", func(t *testing.T) {
		read, fp := create("current")
		if err := revocation.UnregisterForTest(ctx, hub, store, map[string]*corev1.Secret{"current": read}, "current", now); err != nil {
			t.Fatal(err)
		}
		if exists(read) {
			t.Fatal("the secret as it was read is still there")
		}
		if _, ok := recorded("current")[fp]; !ok {
			t.Errorf("its certificate was not recorded")
		}
		// Gone already: nothing to do.
		if err := revocation.UnregisterForTest(ctx, hub, store, map[string]*corev1.Secret{"current": read}, "current", now); err != nil {
			t.Errorf("unregister of a secret gone already: %v", err)
		}
	})
}
