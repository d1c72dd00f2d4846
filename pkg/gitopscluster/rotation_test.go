package gitopscluster_test

// The tests in this file move the shared fake clock forward. Go runs a package's tests in
// file order, and this file sorts last, so earlier tests see an unmoved clock.

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// poke changes a label on the GitOpsCluster so that it is reconciled now, as a requeue timer
// would after the real time passed.
func poke(t *testing.T, ns, name string) {
	t.Helper()
	g := getGOC(t, ns, name)
	if g.Labels == nil {
		g.Labels = map[string]string{}
	}
	g.Labels["test-poke"] = fmt.Sprint(time.Now().UnixNano())
	if err := k8s.Update(context.Background(), g); err != nil {
		t.Fatal(err)
	}
}

func clusterSecretCert(t *testing.T, ns, cluster string) (*x509.Certificate, []*x509.Certificate) {
	t.Helper()
	var cfg struct {
		TLSClientConfig struct{ CertData, CAData []byte } `json:"tlsClientConfig"`
	}
	if err := json.Unmarshal(getSecret(t, ns, "cluster-"+cluster).Data["config"], &cfg); err != nil {
		t.Fatal(err)
	}
	certs, err := pki.ParseCertificates(cfg.TLSClientConfig.CertData)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := pki.ParseCertificates(cfg.TLSClientConfig.CAData)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0], roots
}

func TestLeafRenewalAndCARotationWithTrustOverlap(t *testing.T) {
	ctx := context.Background()
	ns := "rotation"
	createNamespace(t, ns)
	createManagedClusters(t, "rt-1")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "rt-1")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")
	waitClusterSecrets(t, ns, "cluster-rt-1")
	oldCA := leafOf(t, getSecret(t, ns, names.CASecretName))
	oldPrincipal := leafOf(t, getSecret(t, ns, names.PrincipalTLSSecretName))
	oldClient, _ := clusterSecretCert(t, ns, "rt-1")

	// Two thirds of a leaf's year has passed: leaves are renewed, the CA is not.
	clock.Advance(250 * 24 * time.Hour)
	poke(t, ns, "fleet")
	eventually(t, "leaves renewed", func() error {
		p := leafOf(t, getSecret(t, ns, names.PrincipalTLSSecretName))
		c, _ := clusterSecretCert(t, ns, "rt-1")
		if p.SerialNumber.Cmp(oldPrincipal.SerialNumber) == 0 || c.SerialNumber.Cmp(oldClient.SerialNumber) == 0 {
			return fmt.Errorf("not renewed yet")
		}
		return nil
	})
	if ca := leafOf(t, getSecret(t, ns, names.CASecretName)); ca.SerialNumber.Cmp(oldCA.SerialNumber) != 0 {
		t.Fatal("the CA was rotated although it is young")
	}

	// Two thirds of the CA's life has passed: a new CA, and the old one stays trusted.
	clock.Advance(3*365*24*time.Hour + 200*24*time.Hour)
	poke(t, ns, "fleet")
	var newCA *x509.Certificate
	eventually(t, "CA rotated", func() error {
		newCA = leafOf(t, getSecret(t, ns, names.CASecretName))
		if newCA.SerialNumber.Cmp(oldCA.SerialNumber) == 0 {
			return fmt.Errorf("not rotated yet")
		}
		return nil
	})
	bundle, err := pki.ParseCertificates(getSecret(t, ns, names.CASecretName).Data["ca.crt"])
	if err != nil {
		t.Fatal(err)
	}
	if len(bundle) != 2 || bundle[0].SerialNumber.Cmp(newCA.SerialNumber) != 0 || bundle[1].SerialNumber.Cmp(oldCA.SerialNumber) != 0 {
		t.Fatalf("ca.crt should hold the new CA then the old one, has %d certificates", len(bundle))
	}
	eventually(t, "leaves re-issued by the new CA", func() error {
		p := leafOf(t, getSecret(t, ns, names.PrincipalTLSSecretName))
		if err := pki.VerifyChain(p, []*x509.Certificate{newCA}, x509.ExtKeyUsageServerAuth, clock.Now()); err != nil {
			return fmt.Errorf("principal: %v", err)
		}
		c, roots := clusterSecretCert(t, ns, "rt-1")
		if err := pki.VerifyChain(c, []*x509.Certificate{newCA}, x509.ExtKeyUsageClientAuth, clock.Now()); err != nil {
			return fmt.Errorf("cluster secret: %v", err)
		}
		if len(roots) != 2 {
			return fmt.Errorf("cluster secret caData holds %d CAs, want both", len(roots))
		}
		return nil
	})
	// Agents get the bundle through the template, so certificates from either CA verify.
	g := getGOC(t, ns, "fleet")
	tmpl := &addonv1alpha1.AddOnTemplate{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: names.TemplateName(g)}, tmpl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "template carries both CAs", func() error {
		if err := k8s.Get(ctx, types.NamespacedName{Name: names.TemplateName(g)}, tmpl); err != nil {
			return err
		}
		for _, m := range tmpl.Spec.AgentSpec.Workload.Manifests {
			var s struct {
				Kind string            `json:"kind"`
				Data map[string][]byte `json:"data"`
			}
			if json.Unmarshal(m.Raw, &s) == nil && s.Kind == "Secret" {
				certs, err := pki.ParseCertificates(s.Data["ca.crt"])
				if err != nil || len(certs) != 2 {
					return fmt.Errorf("spoke CA secret holds %d certificates (%v)", len(certs), err)
				}
				return nil
			}
		}
		return fmt.Errorf("no CA secret in the template")
	})
}

// TestDeletedCASecretKeepsTrustInTheOldCA: re-minting a deleted CA must not cut every agent
// off: the new bundle still trusts the CA the agents' certificates come from, and no other CA
// that a cluster secret in the namespace names: not the CA of another Argo CD cluster secret
// kept there, nor a CA added to the bundle of one of the project's own secrets that signed
// nothing in it.
func TestDeletedCASecretKeepsTrustInTheOldCA(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "ca-deleted"
	createNamespace(t, ns)
	createManagedClusters(t, "cd-a")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 0, "cd-a")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	eventually(t, "cluster secret", func() error {
		return k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: agentsecret.Name("cd-a")}, &corev1.Secret{})
	})
	old, err := pki.ParseCertificates(getSecret(t, ns, names.CASecretName).Data[corev1.TLSCertKey])
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := pki.NewCA("someone-elses-ca", time.Hour, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Another Argo CD cluster secret in the namespace, naming the CA of its own cluster.
	config, _ := json.Marshal(map[string]any{"tlsClientConfig": map[string]any{"caData": foreign.CertPEM}})
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-elsewhere",
		Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster"}},
		Data: map[string][]byte{"name": []byte("elsewhere"), "server": []byte("https://elsewhere.example"), "config": config}}); err != nil {
		t.Fatal(err)
	}
	// The foreign CA added to the bundle of the project's own cluster secret.
	ours := getSecret(t, ns, agentsecret.Name("cd-a"))
	var cfg map[string]map[string]any
	if err := json.Unmarshal(ours.Data["config"], &cfg); err != nil {
		t.Fatal(err)
	}
	bundle, _ := base64.StdEncoding.DecodeString(cfg["tlsClientConfig"]["caData"].(string))
	cfg["tlsClientConfig"]["caData"] = append(append([]byte{}, bundle...), foreign.CertPEM...)
	ours.Data["config"], _ = json.Marshal(cfg)
	if err := k8s.Update(ctx, ours); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, getSecret(t, ns, names.CASecretName)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new CA whose bundle keeps the old one", func() error {
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.CASecretName}, s); err != nil {
			return err
		}
		current, err := pki.ParseCertificates(s.Data[corev1.TLSCertKey])
		if err != nil || current[0].Equal(old[0]) {
			return fmt.Errorf("not re-minted yet")
		}
		bundle, err := pki.ParseCertificates(s.Data["ca.crt"])
		if err != nil {
			return err
		}
		kept := false
		for _, c := range bundle {
			if c.Equal(foreign.Cert) {
				t.Fatal("the new trust bundle takes in a CA the project did not make")
			}
			kept = kept || c.Equal(old[0])
		}
		if !kept {
			return fmt.Errorf("ca.crt lost the CA the agents' certificates come from")
		}
		return nil
	})
}

// TestReplacedResourceProxyCertificateIsRecorded: the resource-proxy certificate a renewal
// replaces stays valid until it expires, so it goes to the cluster's ledger and is revoked
// with the agent.
func TestReplacedResourceProxyCertificateIsRecorded(t *testing.T) {
	ctx := context.Background()
	ns := "rp-renewal"
	createNamespace(t, ns)
	createManagedClusters(t, "rp-1")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 0, "rp-1")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	waitClusterSecrets(t, ns, "cluster-rp-1")
	old, _ := clusterSecretCert(t, ns, "rp-1")

	clock.Advance(config.DefaultClusterSecretValidity * 5 / 6) // past two thirds of its life, not expired
	poke(t, ns, "fleet")
	eventually(t, "renewed, the old one recorded", func() error {
		if c, _ := clusterSecretCert(t, ns, "rp-1"); c.Equal(old) {
			return fmt.Errorf("not renewed yet")
		}
		_, entries, err := ledger.Store{Client: k8s, Reader: k8s, Namespace: ns}.Read(ctx, "rp-1", clock.Now())
		if err != nil {
			return err
		}
		if _, ok := entries[pki.Fingerprint(old)]; !ok {
			return fmt.Errorf("the replaced certificate is not in the ledger %v", entries)
		}
		return nil
	})
}
