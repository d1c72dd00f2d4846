package clustersecrets

import (
	"context"
	"crypto/x509"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/principalpki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/selection"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// proxyCertHub is a principal namespace on a fake API server that counts the writes made to it.
type proxyCertHub struct {
	c      client.Client
	writes *atomic.Int64
	now    time.Time
	hub    *principalpki.PKI
}

func newProxyCertHub(t *testing.T) *proxyCertHub {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := clusterv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	writes := &atomic.Int64{}
	count := func() { writes.Add(1) }
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count()
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count()
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			count()
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			count()
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	now := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	ca, err := pki.NewCA("proxy-cert test CA", 365*24*time.Hour, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return &proxyCertHub{c: c, writes: writes, now: now, hub: &principalpki.PKI{CA: ca, Bundle: ca.CertPEM}}
}

// sync runs one pass of the writer for cluster c1 with the given lifetime.
func (h *proxyCertHub) sync(t *testing.T, validity time.Duration) time.Time {
	t.Helper()
	cfg := config.Default()
	cfg.ClusterSecretValidity = validity
	cfg.Now = func() time.Time { return h.now }
	w := &Writer{Hub: config.Hub{Client: h.c, Reader: h.c, Config: cfg}}
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "gitops", Name: "fleet"}}
	var secrets corev1.SecretList
	if err := h.c.List(context.Background(), &secrets, client.InNamespace("argocd")); err != nil {
		t.Fatal(err)
	}
	byCluster := map[string]*corev1.Secret{}
	for i := range secrets.Items {
		byCluster[secrets.Items[i].Labels[v1alpha1.LabelAgentName]] = &secrets.Items[i]
	}
	next, err := w.Sync(context.Background(), goc, "argocd", &selection.Observation{Owned: sets.New("c1")}, h.hub, byCluster, nil,
		ledger.Store{Client: h.c, Reader: h.c, Namespace: "argocd"})
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func (h *proxyCertHub) cert(t *testing.T) *x509.Certificate {
	t.Helper()
	s := &corev1.Secret{}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "argocd", Name: agentsecret.Name("c1")}, s); err != nil {
		t.Fatal(err)
	}
	cert := agentsecret.Certificate(s)
	if cert == nil {
		t.Fatal("the cluster secret holds no certificate")
	}
	return cert
}

// TestProxyCertificateLifetime: the resource-proxy client certificate lives seven days by
// default (what a leaked copy is worth, since argocd-agent's resource proxy checks only its CN),
// is renewed at two thirds of its life, costs no write between renewals, and a lifetime outside
// 1h..720h given by a Config that skipped the flag's check is brought within it.
func TestProxyCertificateLifetime(t *testing.T) {
	if got := config.Default().ClusterSecretValidity; got != 7*24*time.Hour {
		t.Errorf("default lifetime %s, want 168h", got)
	}
	for name, tc := range map[string]struct{ set, want time.Duration }{
		"default":       {config.Default().ClusterSecretValidity, 7 * 24 * time.Hour},
		"unset":         {0, 7 * 24 * time.Hour},
		"one day":       {24 * time.Hour, 24 * time.Hour},
		"below the min": {30 * time.Minute, time.Hour},
		"past the max":  {1000 * time.Hour, 720 * time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			h := newProxyCertHub(t)
			next := h.sync(t, tc.set)
			cert := h.cert(t)
			if life := cert.NotAfter.Sub(h.now); life != tc.want {
				t.Errorf("the certificate lives %s from issuance, want %s", life, tc.want)
			}
			if want := pki.RenewalTime(cert); !next.Equal(want) {
				t.Errorf("renewal asked for at %s, want %s (two thirds of its life)", next, want)
			}
			if left := cert.NotAfter.Sub(next); left < tc.want/3-pki.ClockSkewAllowance {
				t.Errorf("renewal leaves %s before expiry, want about a third of %s", left, tc.want)
			}

			// At rest: nothing to write, however often the pass runs before the renewal.
			before := h.writes.Load()
			h.now = next.Add(-time.Second)
			h.sync(t, tc.set)
			if n := h.writes.Load() - before; n != 0 {
				t.Errorf("a pass before the renewal made %d write(s)", n)
			}
			if !h.cert(t).Equal(cert) {
				t.Error("the certificate was replaced before its renewal time")
			}

			// At the renewal time: a new certificate and key.
			h.now = next
			h.sync(t, tc.set)
			renewed := h.cert(t)
			if renewed.Equal(cert) || keysEqual(renewed, cert) {
				t.Error("the renewal kept the certificate or its key")
			}
		})
	}
}

// TestRefusedProxyCertificateIsReplaced: a cluster secret whose certificate is on the
// principal's revocation record or blocklist (a restored backup, a re-applied copy) is given a
// new certificate and key at once, however young the old one is, and the refused certificate
// is not recorded in the cluster's ledger again.
func TestRefusedProxyCertificateIsReplaced(t *testing.T) {
	for name, refuse := range map[string]func(t *testing.T, c client.Client, fp string, notAfter time.Time){
		"on the revocation record": func(t *testing.T, c client.Client, fp string, notAfter time.Time) {
			shard := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: ledger.ShardName(fp),
				Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, ledger.LabelRecord: ledger.RecordRevoked}},
				Data: map[string]string{fp: notAfter.UTC().Format(time.RFC3339) + " revoked c1"}}
			if err := c.Create(context.Background(), shard); err != nil {
				t.Fatal(err)
			}
		},
		"on the blocklist": func(t *testing.T, c client.Client, fp string, _ time.Time) {
			bl := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: ledger.BlocklistName,
				Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}}, Data: map[string]string{fp: ""}}
			if err := c.Create(context.Background(), bl); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := newProxyCertHub(t)
			h.sync(t, 0)
			old := h.cert(t)
			refuse(t, h.c, pki.Fingerprint(old), old.NotAfter)
			h.sync(t, 0)
			cur := h.cert(t)
			if cur.Equal(old) || keysEqual(cur, old) {
				t.Fatal("the cluster secret kept a refused certificate")
			}
			_, entries, err := ledger.Store{Client: h.c, Reader: h.c, Namespace: "argocd"}.Read(context.Background(), "c1", h.now)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := entries[pki.Fingerprint(old)]; ok {
				t.Error("the refused certificate was recorded in the cluster's ledger again")
			}
		})
	}
}

func keysEqual(a, b *x509.Certificate) bool {
	k, ok := a.PublicKey.(interface{ Equal(any) bool })
	return ok && k.Equal(b.PublicKey)
}
