package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// hubCredentialsOf builds a hub client from the credentials cluster's registration agent
// really uses: the hub-kubeconfig-secret it keeps on its own managed cluster (kubeconfig
// naming the hub and its CA, and the client certificate the hub issued to the agent).
func (s *suite) hubCredentialsOf(t *testing.T, cluster string) (client.Client, string) {
	t.Helper()
	ctx := ctxFor(t)
	sec := &corev1.Secret{}
	if err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: fleet.AgentNamespace, Name: "hub-kubeconfig-secret"}, sec); err != nil {
		t.Fatalf("%s: reading the registration agent's hub kubeconfig secret: %v", cluster, err)
	}
	kc, err := clientcmd.Load(sec.Data["kubeconfig"])
	if err != nil {
		t.Fatalf("%s: hub kubeconfig: %v", cluster, err)
	}
	ctxName := kc.CurrentContext
	kctx := kc.Contexts[ctxName]
	if kctx == nil || kc.Clusters[kctx.Cluster] == nil {
		t.Fatalf("%s: hub kubeconfig has no usable current context %q", cluster, ctxName)
	}
	hub := kc.Clusters[kctx.Cluster]
	cfg := &rest.Config{
		Host: hub.Server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   hub.CertificateAuthorityData,
			CertData: sec.Data["tls.crt"],
			KeyData:  sec.Data["tls.key"],
		},
	}
	if len(cfg.TLSClientConfig.CAData) == 0 && hub.CertificateAuthority != "" {
		cfg.TLSClientConfig.CAFile = hub.CertificateAuthority
	}
	certs, err := pki.ParseCertificates(sec.Data["tls.crt"])
	if err != nil || len(certs) == 0 {
		t.Fatalf("%s: hub client certificate: %v", cluster, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s.scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, certs[0].Subject.CommonName
}

// forgedCSR asks for the client certificate of `identity` with the labels of `labelCluster`,
// built like OCM's registration agent builds one (ECDSA P-256, Go's crypto/x509: OCM's subject
// values are longer than openssl allows).
func forgedCSR(t *testing.T, identity, labelCluster string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	csr, err := testenv.AgentCSR(identity, labelCluster, addonName, signerName)
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

// Scenario 5: cluster2's registration agent credentials ask for cluster1's agent identity.
func (s *suite) scenarioForgedCSR(t *testing.T) {
	ctx := ctxFor(t)
	before, _, err := s.clientCert(ctx, "cluster2")
	if err != nil {
		t.Fatalf("cluster2: %v", err)
	}
	csrsBefore, err := s.addonCSRs(ctx, "cluster2")
	if err != nil {
		t.Fatal(err)
	}

	as2, user := s.hubCredentialsOf(t, "cluster2")
	t.Logf("acting on the hub as cluster2's registration agent: %s", user)
	cases := []struct {
		name, labels string
		want         string
	}{
		// The labels claim cluster1, but the requester is cluster2's agent.
		{"labels and subject of cluster1", "cluster1", signer.ReasonWrongRequester},
		// Honest labels, but the subject is cluster1's agent identity.
		{"labels of cluster2, subject of cluster1", "cluster2", signer.ReasonWrongCommonName},
	}
	var created []*certificatesv1.CertificateSigningRequest
	for _, tc := range cases {
		csr := forgedCSR(t, "cluster1", tc.labels)
		if err := as2.Create(ctx, csr); err != nil {
			t.Fatalf("creating a CSR with cluster2's hub credentials (%s): %v", tc.name, err)
		}
		if !strings.HasPrefix(csr.Spec.Username, signer.RequesterPrefix("cluster2")) {
			t.Errorf("the API server recorded requester %q, want cluster2's registration agent", csr.Spec.Username)
		}
		created = append(created, csr)
	}
	for i, tc := range cases {
		csr := created[i]
		s.eventually(t, fmt.Sprintf("forged CSR (%s) Failed with reason %s", tc.name, tc.want), time.Minute,
			func(ctx context.Context) (bool, string) {
				got := &certificatesv1.CertificateSigningRequest{}
				if err := s.hub.Get(ctx, client.ObjectKeyFromObject(csr), got); err != nil {
					return false, err.Error()
				}
				f := csrCondition(got, certificatesv1.CertificateFailed)
				return f != nil && f.Status == corev1.ConditionTrue, describeCSR(got)
			})
	}
	// Give OCM's addon-manager (which approves without checks) and the signer time to act
	// wrongly, then check that nothing was issued.
	time.Sleep(3 * time.Second)
	for i, tc := range cases {
		got := &certificatesv1.CertificateSigningRequest{}
		if err := s.hub.Get(ctx, client.ObjectKeyFromObject(created[i]), got); err != nil {
			t.Fatal(err)
		}
		f := csrCondition(got, certificatesv1.CertificateFailed)
		if f.Reason != tc.want {
			t.Errorf("forged CSR (%s): Failed reason %q (%s), want %q", tc.name, f.Reason, f.Message, tc.want)
		}
		if len(got.Status.Certificate) > 0 {
			t.Errorf("forged CSR (%s) got a certificate: %s", tc.name, describeCSR(got))
		}
		approval := "not approved"
		if a := csrCondition(got, certificatesv1.CertificateApproved); a != nil {
			approval = "approved by " + a.Reason + " (OCM's addon-manager approves unchecked; nobody signed)"
		}
		t.Logf("forged CSR %s (%s): refused, %s: %s", got.Name, tc.name, approval, f.Message)
	}

	// cluster2's own agent certificate is untouched and still good.
	after, _, err := s.clientCert(ctx, "cluster2")
	if err != nil {
		t.Fatalf("cluster2: %v", err)
	}
	if !after.Equal(before) {
		t.Errorf("cluster2's client certificate changed (%s -> %s)", pki.Fingerprint(before), pki.Fingerprint(after))
	}
	s.checkIssuedCert(t, ctx, "cluster2", after)
	bl, err := s.blocklist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bl[pki.Fingerprint(after)]; ok {
		t.Errorf("cluster2's certificate is on the blocklist")
	}
	csrsAfter, err := s.addonCSRs(ctx, "cluster2")
	if err != nil {
		t.Fatal(err)
	}
	// Only the forged one labelled cluster2 is new: cluster2's agent did not have to ask again.
	if len(csrsAfter) != len(csrsBefore)+1 {
		t.Errorf("cluster2 has %d addon CSRs, want %d (the old ones plus the forged one): %s", len(csrsAfter), len(csrsBefore)+1, describeCSRs(csrsAfter))
	}
	s.waitReady(t, 2, 2)
}
