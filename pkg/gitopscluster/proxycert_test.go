package gitopscluster_test

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/cmd"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// proxyCredential is what a cluster secret hands the hub's Argo CD for the resource proxy.
type proxyCredential struct {
	cert   *x509.Certificate
	key    crypto.PublicKey
	config []byte
}

func (c proxyCredential) fingerprint() string { return pki.Fingerprint(c.cert) }

func (c proxyCredential) sameKey(o proxyCredential) bool {
	k, ok := c.key.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(o.key)
}

// liveProxyCredential reads cluster's secret from the API server; false when there is none or
// it is being deleted.
func liveProxyCredential(t *testing.T, ns, cluster string) (proxyCredential, bool) {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: agentsecret.Name(cluster)}, s); err != nil || !s.DeletionTimestamp.IsZero() {
		return proxyCredential{}, false
	}
	var cfg agentsecret.Config
	if err := json.Unmarshal(s.Data["config"], &cfg); err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertificates(cfg.TLSClientConfig.CertData)
	if err != nil || len(certs) == 0 {
		t.Fatalf("the cluster secret of %s holds no certificate (%v)", cluster, err)
	}
	key, err := pki.ParsePrivateKey(cfg.TLSClientConfig.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	return proxyCredential{cert: certs[0], key: key.Public(), config: s.Data["config"]}, true
}

// refusedOnPrincipal reports whether fingerprint fp is on the principal's blocklist or its
// revocation record.
func (f *revocationFixture) refusedOnPrincipal(fp string) (blocked, recorded bool) {
	f.t.Helper()
	bl, err := f.store().Blocklist(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	rec, err := f.store().Revoked(context.Background(), clock.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	_, blocked = bl[fp]
	_, recorded = rec[fp]
	return blocked, recorded
}

// freshCredential waits for cluster's secret to hold a certificate that is none of before and
// neither blocked nor recorded as revoked, with a key none of before had.
func (f *revocationFixture) freshCredential(cluster string, before ...proxyCredential) proxyCredential {
	f.t.Helper()
	var cur proxyCredential
	eventually(f.t, "a fresh resource-proxy credential for "+cluster, func() error {
		var ok bool
		if cur, ok = liveProxyCredential(f.t, f.ns, cluster); !ok {
			return fmt.Errorf("no cluster secret for %s", cluster)
		}
		for _, b := range before {
			if cur.fingerprint() == b.fingerprint() {
				return fmt.Errorf("the cluster secret holds an earlier certificate %s", b.fingerprint())
			}
			if cur.sameKey(b) {
				return fmt.Errorf("the cluster secret holds an earlier key")
			}
		}
		if blocked, recorded := f.refusedOnPrincipal(cur.fingerprint()); blocked || recorded {
			return fmt.Errorf("the cluster secret's certificate is refused on the principal (blocked=%v recorded=%v)", blocked, recorded)
		}
		return nil
	})
	return cur
}

// restore writes an earlier config back into cluster's secret, as a backup restore or a GitOps
// tool re-applying a stored copy of the secret would.
func (f *revocationFixture) restore(cluster string, earlier proxyCredential) {
	f.t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: agentsecret.Name(cluster)}, s); err != nil {
		f.t.Fatal(err)
	}
	s.Data["config"] = earlier.config
	if err := k8s.Update(context.Background(), s); err != nil {
		f.t.Fatal(err)
	}
}

// TestRevokedProxyCertificateIsNeverReused: after a revocation (a person's AgentRevocation, or
// the cluster leaving the selection) and its lift (the AgentRevocation deleted, the cluster
// selected again), the cluster secret gets a new resource-proxy certificate with a new key:
// never the one it had before, which stays blocked and on the revocation record. argocd-agent's
// resource proxy checks only a certificate's CN, so the manager must never hand the revoked one
// out again either: a cluster secret that comes to hold it again (a backup restored, a stored
// copy re-applied) is given a fresh one at once, and the revoked one is not recorded again.
func TestRevokedProxyCertificateIsNeverReused(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		ns              string
		revoke, readmit func(f *revocationFixture, cluster string)
	}{
		"AgentRevocation lifted": {
			ns: "proxy-lift",
			revoke: func(f *revocationFixture, cluster string) {
				if err := k8s.Create(context.Background(), &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: cluster},
					Spec: v1alpha1.AgentRevocationSpec{Reason: "resource-proxy credential leaked"}}); err != nil {
					f.t.Fatal(err)
				}
			},
			readmit: func(f *revocationFixture, cluster string) {
				if err := k8s.Delete(context.Background(), &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: cluster}}); err != nil {
					f.t.Fatal(err)
				}
			},
		},
		"departed, selected again": {
			ns: "proxy-depart",
			// The other cluster stays, so that one leaving is within the circuit breaker's limit.
			revoke:  func(f *revocationFixture, _ string) { setDecisions(f.t, f.ns, "p", 0, f.ns+"-keep") },
			readmit: func(f *revocationFixture, cluster string) { setDecisions(f.t, f.ns, "p", 0, cluster, f.ns+"-keep") },
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newRevocationFixture(t, tc.ns)
			cluster := tc.ns + "-a"
			f.selectAll(cluster, tc.ns+"-keep")
			first, ok := liveProxyCredential(t, f.ns, cluster)
			if !ok {
				t.Fatal("no cluster secret")
			}

			tc.revoke(f, cluster)
			f.certs[cluster] = first.cert
			f.waitRevoked(cluster)
			if blocked, recorded := f.refusedOnPrincipal(first.fingerprint()); !blocked || !recorded {
				t.Fatalf("the revoked resource-proxy certificate: blocked=%v recorded=%v", blocked, recorded)
			}

			tc.readmit(f, cluster)
			second := f.freshCredential(cluster, first)
			if blocked, recorded := f.refusedOnPrincipal(first.fingerprint()); !blocked || !recorded {
				t.Errorf("re-admitting the cluster unblocked its revoked certificate: blocked=%v recorded=%v", blocked, recorded)
			}

			// The pre-revocation secret comes back.
			f.restore(cluster, first)
			f.freshCredential(cluster, first, second)
			_, entries, err := f.store().Read(context.Background(), cluster, clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := entries[first.fingerprint()]; ok {
				t.Error("the revoked certificate was recorded in the cluster's ledger again")
			}
		})
	}
}

// TestProxyCertificateLifetimeIsBounded: the resource-proxy certificate is what a leak through
// the resource proxy is worth, so the manager refuses a lifetime outside 1h..720h before it
// connects to anything, and issues seven-day certificates by default.
func TestProxyCertificateLifetimeIsBounded(t *testing.T) {
	if got := manager.DefaultOptions().Fleet.ClusterSecretValidity; got != 7*24*time.Hour {
		t.Errorf("default --cluster-secret-cert-validity is %s, want 168h", got)
	}
	for _, value := range []time.Duration{time.Hour, 7 * 24 * time.Hour, 720 * time.Hour} {
		opts := manager.DefaultOptions()
		opts.Fleet.ClusterSecretValidity = value
		if err := opts.Validate(); err != nil {
			t.Errorf("--cluster-secret-cert-validity=%s refused: %v", value, err)
		}
	}
	// Only refused values go through the command: one it accepts would go on to set the
	// process's logger.
	for _, value := range []string{"0s", "30m", "59m59s", "721h", "8760h"} {
		root := cmd.NewRootCommand()
		// The kubeconfig does not exist: a bad lifetime must be refused before it is read.
		root.SetArgs([]string{"manager", "--kubeconfig", "/does/not/exist", "--cluster-secret-cert-validity", value})
		if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "--cluster-secret-cert-validity") {
			t.Errorf("--cluster-secret-cert-validity=%s: want it refused before connecting, got %v", value, err)
		}
	}

	// On the real API server, with the binary's default.
	f := newRevocationFixture(t, "proxy-lifetime")
	f.selectAll("pl-a")
	cred, _ := liveProxyCredential(t, f.ns, "pl-a")
	if life := cred.cert.NotAfter.Sub(clock.Now()); life < 7*24*time.Hour-time.Second || life > 7*24*time.Hour {
		t.Errorf("the resource-proxy certificate lives %s from its issuance, want 168h", life)
	}
}
