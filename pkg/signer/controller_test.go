package signer_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	ledgerpkg "github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
)

// forged is one CSR that must never be signed.
type forged struct {
	name string
	// as creates the CSR; default agentOf(cluster).
	as *identity
	// cluster is the cluster-name label (and the default requester); default cluster1.
	cluster string
	key     crypto.Signer // default p256
	// tmpl edits the request; default agentRequest(cluster).
	tmpl func(*x509.CertificateRequest)
	// obj edits the CSR object after the request is encoded.
	obj func(*certificatesv1.CertificateSigningRequest)
	// before runs right before the CSR is created.
	before func(t *testing.T, h *hubFixture)
	// want is the Failed reason; refusedByAPI means the API server itself refuses the CSR,
	// and then want is what the signer's check says about it.
	want         string
	refusedByAPI bool
}

func oid(ints ...int) asn1.ObjectIdentifier { return ints }

func forgedCases(t *testing.T) []forged {
	keys(t)
	cluster2Agent := agentOf("cluster2")
	notAnAgent := identity{user: "alice", groups: []string{"developers"}}
	agentWithoutGroup := identity{user: signer.RequesterPrefix("cluster1") + "agent1", groups: []string{"system:open-cluster-management:managed-clusters"}}
	badSignature := func(c *certificatesv1.CertificateSigningRequest) {
		block, _ := pem.Decode(c.Spec.Request)
		der := bytes.Clone(block.Bytes)
		der[len(der)-3] ^= 0xff // inside the signature BIT STRING
		c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}
	return []forged{
		{name: "another cluster's identity in CN", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.CommonName = signer.DefaultAgentUser("cluster2", addonName)
		}, want: signer.ReasonWrongCommonName},
		{name: "another cluster's identity in CN and O", tmpl: func(r *x509.CertificateRequest) {
			*r = *agentRequest("cluster2")
		}, want: signer.ReasonWrongCommonName},
		{name: "right CN, another cluster's requester", as: &cluster2Agent, want: signer.ReasonWrongRequester},
		{name: "requester not an agent at all", as: &notAnAgent, want: signer.ReasonWrongRequester},
		{name: "agent user without its cluster group", as: &agentWithoutGroup, want: signer.ReasonWrongRequester},
		{name: "missing labels", obj: func(c *certificatesv1.CertificateSigningRequest) { c.Labels = nil }, want: signer.ReasonMissingLabels},
		{name: "unknown cluster", cluster: "ghost", want: signer.ReasonUnknownCluster},
		{name: "cluster not in any placement", cluster: "lonely", want: signer.ReasonNotSelected},
		{name: "cluster removed from the placement a moment ago", cluster: "cluster3",
			before: func(t *testing.T, h *hubFixture) {
				if err := setDecisions(context.Background(), h.admin, "fleet", "cluster1", "cluster2", "argocd"); err != nil {
					t.Fatal(err)
				}
			}, want: signer.ReasonNotSelected},
		{name: "cluster name equals the principal namespace", cluster: "argocd", want: signer.ReasonInvalidAgentName},
		{name: "owner has no AddOnTemplate", cluster: "cluster-notpl", want: signer.ReasonNoTemplate},
		{name: "owner's template registers another signer", cluster: "cluster-othersigner", want: signer.ReasonNoTemplate},
		{name: "owner's principal has no CA", cluster: "cluster-noca", want: signer.ReasonCAUnavailable},
		{name: "wrong addon name", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Labels[signer.AddonNameLabel] = "other-addon"
		}, want: signer.ReasonWrongAddon},
		{name: "default subject where the template names another one", cluster: "cluster-custom", want: signer.ReasonTemplateSubject},
		{name: "the subject an edited template names", cluster: "cluster-custom", tmpl: func(r *x509.CertificateRequest) {
			r.Subject = pkix.Name{CommonName: customUser, Organization: []string{"argocd-agents"}, OrganizationalUnit: []string{"gitops"}}
		}, want: signer.ReasonTemplateSubject},
		{name: "extra O system:masters", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.Organization = append(r.Subject.Organization, "system:masters")
		}, want: signer.ReasonWrongOrganization},
		{name: "extra subject attribute", tmpl: func(r *x509.CertificateRequest) { r.Subject.Country = []string{"US"} },
			want: signer.ReasonWrongSubject},
		{name: "extra DNS SAN", tmpl: func(r *x509.CertificateRequest) {
			r.DNSNames = append(r.DNSNames, "argocd-agent-principal.argocd.svc")
		}, want: signer.ReasonForbiddenSAN},
		{name: "IP SAN", tmpl: func(r *x509.CertificateRequest) { r.IPAddresses = []net.IP{net.ParseIP("10.0.0.1")} },
			want: signer.ReasonForbiddenSAN},
		{name: "URI SAN", tmpl: func(r *x509.CertificateRequest) {
			r.URIs = []*url.URL{{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/argocd/sa/argocd-server"}}
		}, want: signer.ReasonForbiddenSAN},
		{name: "RSA-1024 key", key: rsa1024, want: signer.ReasonWeakKey},
		{name: "CA certificate requested", tmpl: func(r *x509.CertificateRequest) {
			bc, err := asn1.Marshal(struct{ IsCA bool }{true})
			if err != nil {
				t.Fatal(err)
			}
			r.ExtraExtensions = []pkix.Extension{{Id: oid(2, 5, 29, 19), Critical: true, Value: bc}}
		}, want: signer.ReasonCARequested},
		{name: "server auth usage", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageServerAuth)
		}, want: signer.ReasonForbiddenUsage},
		{name: "garbage around the PEM block", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = append(append([]byte("issued-for: cluster1\n"), c.Spec.Request...), "\ntrailing"...)
		}, want: signer.ReasonUnparsable},
		{name: "a second request smuggled after the first", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = append(c.Spec.Request, requestPEM(t, p256b, agentRequest("cluster2"))...)
		}, want: signer.ReasonUnparsable},
		{name: "garbage PEM", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = []byte("-----BEGIN CERTIFICATE REQUEST-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE REQUEST-----\n")
		}, want: signer.ReasonUnparsable, refusedByAPI: true},
		{name: "bad CSR signature", obj: badSignature, want: signer.ReasonBadSignature, refusedByAPI: true},
	}
}

// build makes the CSR object of a case and the identity that creates it.
func (f forged) build(t *testing.T) (*certificatesv1.CertificateSigningRequest, identity) {
	cluster := f.cluster
	if cluster == "" {
		cluster = "cluster1"
	}
	id := agentOf(cluster)
	if f.as != nil {
		id = *f.as
	}
	key := f.key
	if key == nil {
		key = p256
	}
	tmpl := agentRequest(cluster)
	if f.tmpl != nil {
		f.tmpl(tmpl)
	}
	csr := csrObject(cluster, signerName, requestPEM(t, key, tmpl))
	if f.obj != nil {
		f.obj(csr)
	}
	return csr, id
}

// TestForgedCSRsAreRefused creates forged and malformed CSRs through the API server, as the
// requester each case names, and checks that each one ends Failed with its reason, unsigned
// and unapproved by the signer, with an Event and a metric sample.
func TestForgedCSRsAreRefused(t *testing.T) {
	h := hub(t)
	ctx := context.Background()
	before := csrCounts(t)
	cases := forgedCases(t)
	if len(cases) < 16 {
		t.Fatalf("only %d cases", len(cases))
	}
	created := map[string]forged{}
	wantDelta := map[string]float64{}
	for _, tc := range cases {
		if tc.before != nil {
			tc.before(t, h)
		}
		csr, id := tc.build(t)
		err := h.as(t, id).Create(ctx, csr)
		if tc.refusedByAPI {
			// The API server checks the first PEM block's syntax and signature itself, so
			// such a CSR never reaches a signer; CheckCSR refuses it as well.
			if !apierrors.IsInvalid(err) {
				t.Errorf("%s: the API server accepted the CSR (err %v)", tc.name, err)
			}
			csr.Spec.Username, csr.Spec.Groups = id.user, id.groups
			exp := signer.DefaultExpectation(signerName, "cluster1", addonName)
			if _, rej := signer.CheckCSR(csr, exp); rej == nil || rej.Reason != tc.want {
				t.Errorf("%s: CheckCSR = %v, want %s", tc.name, rej, tc.want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: creating the CSR: %v", tc.name, err)
		}
		created[csr.Name] = tc
		wantDelta[tc.want]++
	}
	// Put cluster3 back for the other tests.
	t.Cleanup(func() {
		if err := setDecisions(ctx, h.admin, "fleet", "cluster1", "cluster2", "cluster3", "argocd"); err != nil {
			t.Error(err)
		}
	})

	for name, tc := range created {
		csr := h.waitFinal(t, name)
		failed := condition(csr, certificatesv1.CertificateFailed)
		switch {
		case len(csr.Status.Certificate) > 0:
			t.Errorf("%s: SIGNED", tc.name)
		case failed == nil:
			t.Errorf("%s: not failed: %+v", tc.name, csr.Status.Conditions)
		case failed.Reason != tc.want:
			t.Errorf("%s: reason %s (%s), want %s", tc.name, failed.Reason, failed.Message, tc.want)
		case failed.Message == "" || failed.Status != corev1.ConditionTrue:
			t.Errorf("%s: condition %+v", tc.name, failed)
		}
		if a := condition(csr, certificatesv1.CertificateApproved); a != nil {
			t.Errorf("%s: approved (%s)", tc.name, a.Reason)
		}
		if testing.Verbose() && failed != nil {
			t.Logf("%-50s %-24s %s", tc.name, failed.Reason, failed.Message)
		}
	}

	// A decided CSR is left alone: more reconciles write nothing.
	for name := range created {
		rv := h.getCSR(t, name).ResourceVersion
		if _, err := h.rec.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
		if got := h.getCSR(t, name).ResourceVersion; got != rv {
			t.Errorf("reconciling failed CSR %s again wrote it (%s -> %s)", name, rv, got)
		}
	}

	after := csrCounts(t)
	for reason, n := range wantDelta {
		key := [2]string{signer.ResultRejected, reason}
		if got := after[key] - before[key]; got != n {
			t.Errorf("metric %s{result=rejected,reason=%s} grew by %v, want %v", signer.MetricCSRTotal, reason, got, n)
		}
	}
	if got := after[[2]string{signer.ResultSigned, signer.ReasonSigned}] - before[[2]string{signer.ResultSigned, signer.ReasonSigned}]; got != 0 {
		t.Errorf("signed counter grew by %v during the forged cases", got)
	}

	// Every refusal is explained in a Warning Event on its CSR.
	eventually(t, "a Warning Event per refused CSR", func() error {
		var list eventsv1.EventList
		if err := h.admin.List(ctx, &list); err != nil {
			return err
		}
		seen := map[string]string{}
		for _, e := range list.Items {
			if e.Regarding.Kind == "CertificateSigningRequest" && e.Type == corev1.EventTypeWarning {
				seen[e.Regarding.Name] = e.Reason
			}
		}
		for name, tc := range created {
			if seen[name] != tc.want {
				return fmt.Errorf("%s: event reason %q, want %q", tc.name, seen[name], tc.want)
			}
		}
		return nil
	})
}

// TestOtherSignersAreIgnored: a CSR for another signer is never touched.
func TestOtherSignersAreIgnored(t *testing.T) {
	h := hub(t)
	keys(t)
	csr := h.createCSR(t, agentOf("cluster1"), csrObject("cluster1", "example.com/someone-else", requestPEM(t, p256, agentRequest("cluster1"))))
	// Give the signer time to (wrongly) act, then check nothing happened.
	probe := h.createCSR(t, agentOf("cluster1"), csrObject("cluster1", signerName, requestPEM(t, p256, agentRequest("cluster1"))))
	h.waitSigned(t, probe.Name)
	if got := h.getCSR(t, csr.Name); len(got.Status.Conditions) > 0 || len(got.Status.Certificate) > 0 {
		t.Fatalf("a CSR of another signer was touched: %+v", got.Status)
	}
}

// TestSignsAgentCertificates is the happy path: ECDSA and RSA keys, OCM's default subject, and
// a template's custom subject.
func TestSignsAgentCertificates(t *testing.T) {
	h := hub(t)
	keys(t)
	ctx := context.Background()
	before := csrCounts(t)
	signed := 0

	check := func(t *testing.T, csr *certificatesv1.CertificateSigningRequest, cert *x509.Certificate, cluster string, validity time.Duration) {
		t.Helper()
		signed++
		a := condition(csr, certificatesv1.CertificateApproved)
		if a == nil || a.Reason != signer.ReasonApproved || a.Status != corev1.ConditionTrue {
			t.Errorf("Approved condition %+v, want reason %s", a, signer.ReasonApproved)
		}
		if f := condition(csr, certificatesv1.CertificateFailed); f != nil {
			t.Errorf("also Failed: %+v", f)
		}
		now := time.Now()
		if err := pki.VerifyChain(cert, []*x509.Certificate{h.ca.Cert}, x509.ExtKeyUsageClientAuth, now); err != nil {
			t.Errorf("does not chain to the owner's CA: %v", err)
		}
		if err := pki.VerifyChain(cert, []*x509.Certificate{h.ca.Cert}, x509.ExtKeyUsageServerAuth, now); err == nil {
			t.Error("usable for server auth")
		}
		if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || len(cert.UnknownExtKeyUsage) > 0 || cert.IsCA {
			t.Errorf("EKU %v / unknown %v / CA %v, want ClientAuth only", cert.ExtKeyUsage, cert.UnknownExtKeyUsage, cert.IsCA)
		}
		block, _ := pem.Decode(csr.Spec.Request)
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(cert.RawSubject, req.RawSubject) {
			t.Errorf("subject %q differs from the requested %q", cert.Subject, req.Subject)
		}
		if !cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(req.PublicKey) {
			t.Error("certificate is for another key")
		}
		if !slices.Equal(cert.DNSNames, req.DNSNames) || len(cert.IPAddresses)+len(cert.URIs)+len(cert.EmailAddresses) > 0 {
			t.Errorf("SANs %v %v %v %v, want DNS %v", cert.DNSNames, cert.IPAddresses, cert.URIs, cert.EmailAddresses, req.DNSNames)
		}
		if cert.NotAfter.After(h.ca.Cert.NotAfter) {
			t.Errorf("NotAfter %s is past the CA's %s", cert.NotAfter, h.ca.Cert.NotAfter)
		}
		want := csr.CreationTimestamp.Add(validity)
		if d := cert.NotAfter.Sub(want); d < -time.Minute || d > time.Minute {
			t.Errorf("NotAfter %s, want about %s (validity %s)", cert.NotAfter, want, validity)
		}
		ledger := &corev1.ConfigMap{}
		if err := h.admin.Get(ctx, types.NamespacedName{Namespace: principalNS, Name: ledgerpkg.LedgerName(cluster)}, ledger); err != nil {
			t.Fatalf("ledger: %v", err)
		}
		if got := ledger.Data[pki.Fingerprint(cert)]; got != cert.NotAfter.UTC().Format(time.RFC3339) {
			t.Errorf("ledger entry %q, want %s; ledger %v", got, cert.NotAfter.UTC().Format(time.RFC3339), ledger.Data)
		}
		if ledger.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
			t.Errorf("ledger labels %v", ledger.Labels)
		}
	}

	t.Run("ECDSA P-256, validity from the GitOpsCluster", func(t *testing.T) {
		csr := h.createCSR(t, agentOf("cluster1"), csrObject("cluster1", signerName, requestPEM(t, p256, agentRequest("cluster1"))))
		csr, cert := h.waitSigned(t, csr.Name)
		check(t, csr, cert, "cluster1", 48*time.Hour)
		// What the principal's auth regex reads: the CN first, then the O values.
		if got := cert.Subject.String(); !strings.HasPrefix(got, "CN="+signer.DefaultAgentUser("cluster1", addonName)+",O=") {
			t.Errorf("subject %s", got)
		}

		// Idempotent: reconciling an issued CSR again changes nothing.
		ledger := func() map[string]string {
			cm := &corev1.ConfigMap{}
			if err := h.admin.Get(ctx, types.NamespacedName{Namespace: principalNS, Name: ledgerpkg.LedgerName("cluster1")}, cm); err != nil {
				t.Fatal(err)
			}
			return cm.Data
		}
		l1 := ledger()
		for range 3 {
			if _, err := h.rec.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: csr.Name}}); err != nil {
				t.Fatal(err)
			}
		}
		again := h.getCSR(t, csr.Name)
		if again.ResourceVersion != csr.ResourceVersion || !bytes.Equal(again.Status.Certificate, csr.Status.Certificate) {
			t.Error("reconciling an issued CSR again changed it")
		}
		if l2 := ledger(); len(l2) != len(l1) {
			t.Errorf("ledger changed from %v to %v", l1, l2)
		}
	})

	t.Run("RSA 2048, NotAfter capped at the CA's", func(t *testing.T) {
		goc := &v1alpha1.GitOpsCluster{}
		if err := h.admin.Get(ctx, types.NamespacedName{Namespace: gitopsNS, Name: "fleet"}, goc); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(goc.DeepCopy())
		goc.Spec.ArgoCDAgentAddon.ClientCertificateValidity = &metav1.Duration{Duration: 2 * caValidity}
		if err := h.admin.Patch(ctx, goc, patch); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			patch := client.MergeFrom(goc.DeepCopy())
			goc.Spec.ArgoCDAgentAddon.ClientCertificateValidity = &metav1.Duration{Duration: 48 * time.Hour}
			if err := h.admin.Patch(ctx, goc, patch); err != nil {
				t.Error(err)
			}
		})
		eventually(t, "the signer's cache sees the new validity", func() error {
			g := &v1alpha1.GitOpsCluster{}
			if err := h.mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(goc), g); err != nil {
				return err
			}
			if g.Spec.ArgoCDAgentAddon.ClientCertificateValidity.Duration != 2*caValidity {
				return errors.New("not yet")
			}
			return nil
		})
		csr := h.createCSR(t, agentOf("cluster2"), csrObject("cluster2", signerName, requestPEM(t, rsa2048, agentRequest("cluster2"))))
		csr, cert := h.waitSigned(t, csr.Name)
		if !cert.NotAfter.Equal(h.ca.Cert.NotAfter) {
			t.Errorf("NotAfter %s, want the CA's %s", cert.NotAfter, h.ca.Cert.NotAfter)
		}
		check(t, csr, cert, "cluster2", h.ca.Cert.NotAfter.Sub(csr.CreationTimestamp.Time))
		if cert.KeyUsage&x509.KeyUsageKeyEncipherment == 0 {
			t.Error("an RSA client certificate should allow key encipherment")
		}
	})

	// What OCM v1.2.x's registration agents really ask for (addon-framework v1.2.0's
	// agent.DefaultGroups adds system:authenticated); seen on the local fleet (test/e2e).
	t.Run("OCM v1.2 default subject with system:authenticated", func(t *testing.T) {
		req := agentRequest("cluster1")
		req.Subject.Organization = append(req.Subject.Organization, signer.OCMAuthenticatedGroup)
		csr := h.createCSR(t, agentOf("cluster1"), csrObject("cluster1", signerName, requestPEM(t, p256, req)))
		csr, cert := h.waitSigned(t, csr.Name)
		check(t, csr, cert, "cluster1", 48*time.Hour)
	})

	t.Run("a shorter spec.expirationSeconds wins", func(t *testing.T) {
		csr := csrObject("cluster1", signerName, requestPEM(t, p256, agentRequest("cluster1")))
		secs := int32(2 * 3600)
		csr.Spec.ExpirationSeconds = &secs
		csr = h.createCSR(t, agentOf("cluster1"), csr)
		csr, cert := h.waitSigned(t, csr.Name)
		check(t, csr, cert, "cluster1", 2*time.Hour)
	})

	after := csrCounts(t)
	key := [2]string{signer.ResultSigned, signer.ReasonSigned}
	if got := after[key] - before[key]; got != float64(signed) {
		t.Errorf("metric %s{result=signed} grew by %v, want %d", signer.MetricCSRTotal, got, signed)
	}
}

// csrCounts reads argocd_agent_addon_csr_total from controller-runtime's registry, which is
// what the manager's /metrics serves. Every reason is there from the start.
func csrCounts(t *testing.T) map[[2]string]float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != signer.MetricCSRTotal {
			continue
		}
		for _, m := range mf.GetMetric() {
			var result, reason string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "result":
					result = l.GetValue()
				case "reason":
					reason = l.GetValue()
				}
			}
			out[[2]string{result, reason}] = m.GetCounter().GetValue()
		}
	}
	return out
}

func TestMetricSeriesArePreregistered(t *testing.T) {
	got := csrCounts(t)
	if _, ok := got[[2]string{signer.ResultSigned, signer.ReasonSigned}]; !ok {
		t.Errorf("no signed series in %v", got)
	}
	for _, r := range signer.AllReasons() {
		if _, ok := got[[2]string{signer.ResultRejected, r}]; !ok {
			t.Errorf("no rejected series for reason %s", r)
		}
	}
}

// retryReconciler is a second signer, for retrySigner, whose writes and reads can be made to
// fail; the tests call it by hand.
func (h *hubFixture) retryReconciler(t *testing.T, funcs interceptor.Funcs) *signer.Reconciler {
	t.Helper()
	direct, err := client.NewWithWatch(h.env.Config, client.Options{Scheme: h.admin.Scheme(), Cache: &client.CacheOptions{
		Reader:     h.mgr.GetCache(),
		DisableFor: []client.Object{&certificatesv1.CertificateSigningRequest{}, &corev1.ConfigMap{}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := signer.DefaultConfig()
	cfg.SignerName = retrySigner
	return &signer.Reconciler{Client: interceptor.NewClient(direct, funcs), APIReader: h.mgr.GetAPIReader(), Config: cfg}
}

// TestApprovalAndSigningSurviveRetries: a failure after the approval (here: publishing the
// certificate) is retried to a single approval and one published, recorded certificate.
func TestApprovalAndSigningSurviveRetries(t *testing.T) {
	h := hub(t)
	keys(t)
	ctx := context.Background()
	failures := 1
	rec := h.retryReconciler(t, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && sub == "status" && len(csr.Status.Certificate) > 0 && failures > 0 {
				failures--
				return apierrors.NewServiceUnavailable("injected failure")
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	csr := h.createCSR(t, agentOf("cluster1"), csrObject("cluster1", retrySigner, requestPEM(t, p256, agentRequest("cluster1"))))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: csr.Name}}
	if _, err := rec.Reconcile(ctx, req); err == nil {
		t.Fatal("the injected failure was not returned")
	}
	mid := h.getCSR(t, csr.Name)
	if len(mid.Status.Certificate) > 0 || condition(mid, certificatesv1.CertificateFailed) != nil {
		t.Fatalf("after the failed publish: %+v", mid.Status)
	}
	if a := condition(mid, certificatesv1.CertificateApproved); a == nil || a.Reason != signer.ReasonApproved {
		t.Fatalf("not approved after the first attempt: %+v", mid.Status.Conditions)
	}
	for range 2 {
		if _, err := rec.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	done, cert := h.waitSigned(t, csr.Name)
	approvals := 0
	for _, c := range done.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			approvals++
		}
	}
	if approvals != 1 {
		t.Errorf("%d Approved conditions: %+v", approvals, done.Status.Conditions)
	}
	cm := &corev1.ConfigMap{}
	if err := h.admin.Get(ctx, types.NamespacedName{Namespace: principalNS, Name: ledgerpkg.LedgerName("cluster1")}, cm); err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Data[pki.Fingerprint(cert)]; !ok {
		t.Errorf("the published certificate is not in the ledger %v", cm.Data)
	}
}

// TestTransientReadErrorsAreRetried: a failed read requeues the CSR instead of failing it.
func TestTransientReadErrorsAreRetried(t *testing.T) {
	h := hub(t)
	keys(t)
	ctx := context.Background()
	gr := schema.GroupResource{Group: clusterv1.GroupName, Resource: "managedclusters"}
	for _, what := range []string{"ManagedCluster", "CA secret"} {
		t.Run(what, func(t *testing.T) {
			rec := h.retryReconciler(t, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					switch obj.(type) {
					case *clusterv1.ManagedCluster:
						if what == "ManagedCluster" {
							return apierrors.NewServerTimeout(gr, "get", 1)
						}
					case *corev1.Secret:
						if what == "CA secret" {
							return apierrors.NewTooManyRequests("slow down", 1)
						}
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			csr := h.createCSR(t, agentOf("cluster1"), csrObject("cluster1", retrySigner, requestPEM(t, p256, agentRequest("cluster1"))))
			if _, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: csr.Name}}); err == nil {
				t.Fatal("a failed read was not returned")
			}
			if got := h.getCSR(t, csr.Name); len(got.Status.Conditions) > 0 || len(got.Status.Certificate) > 0 {
				t.Fatalf("a failed read changed the CSR: %+v", got.Status)
			}
		})
	}
}

// TestStaleCacheDoesNotSign: when the cache still shows a cluster as selected after its removal,
// the signer's read past the cache refuses it.
func TestStaleCacheDoesNotSign(t *testing.T) {
	h := hub(t)
	keys(t)
	ctx := context.Background()
	rec := h.retryReconciler(t, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			if pds, ok := list.(*clusterv1beta1.PlacementDecisionList); ok && lo.FieldSelector != nil {
				// What a cache that missed the removal of "lonely" from fleet's decisions returns.
				pds.Items = append(pds.Items, clusterv1beta1.PlacementDecision{
					ObjectMeta: metav1.ObjectMeta{Namespace: gitopsNS, Name: "fleet-decision-0", Labels: map[string]string{clusterv1beta1.PlacementLabel: "fleet"}},
					Status:     clusterv1beta1.PlacementDecisionStatus{Decisions: []clusterv1beta1.ClusterDecision{{ClusterName: "lonely"}}},
				})
			}
			return nil
		},
	})
	csr := h.createCSR(t, agentOf("lonely"), csrObject("lonely", retrySigner, requestPEM(t, p256, agentRequest("lonely"))))
	if _, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: csr.Name}}); err != nil {
		t.Fatal(err)
	}
	got := h.getCSR(t, csr.Name)
	f := condition(got, certificatesv1.CertificateFailed)
	if len(got.Status.Certificate) > 0 || f == nil || f.Reason != signer.ReasonNotSelected || !strings.Contains(f.Message, "no longer selected") {
		t.Fatalf("CSR of a cluster only a stale cache selects: certificate %d bytes, Failed %+v", len(got.Status.Certificate), f)
	}
}

// TestApprovedByOthers: OCM's addon-manager approves every CSR of its template's signer without
// looking at it. Such an approval neither stops the checks nor gets a second Approved condition.
func TestApprovedByOthers(t *testing.T) {
	h := hub(t)
	keys(t)
	ctx := context.Background()
	rec := h.retryReconciler(t, interceptor.Funcs{})
	approve := func(csr *certificatesv1.CertificateSigningRequest) {
		t.Helper()
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApprovedByHubCSRApprovingController",
		})
		if err := h.admin.SubResource("approval").Update(ctx, csr); err != nil {
			t.Fatal(err)
		}
	}
	good := h.createCSR(t, agentOf("cluster1"), csrObject("cluster1", retrySigner, requestPEM(t, p256, agentRequest("cluster1"))))
	forged := h.createCSR(t, agentOf("cluster2"), csrObject("cluster1", retrySigner, requestPEM(t, p256b, agentRequest("cluster1"))))
	approve(good)
	approve(forged)
	for _, csr := range []*certificatesv1.CertificateSigningRequest{good, forged} {
		if _, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: csr.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	got := h.getCSR(t, good.Name)
	approvals := 0
	for _, c := range got.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			approvals++
		}
	}
	if len(got.Status.Certificate) == 0 || approvals != 1 {
		t.Errorf("pre-approved good CSR: certificate %d bytes, %d Approved conditions", len(got.Status.Certificate), approvals)
	}
	got = h.getCSR(t, forged.Name)
	if f := condition(got, certificatesv1.CertificateFailed); len(got.Status.Certificate) > 0 || f == nil || f.Reason != signer.ReasonWrongRequester {
		t.Errorf("pre-approved forged CSR: certificate %d bytes, Failed %+v", len(got.Status.Certificate), f)
	}
}

// TestSignedCSRSeenStaleIsLeftAlone: right after the signer published a certificate, the cache
// may still show the CSR approved but unsigned. Reconciling that view neither signs again nor
// records a second certificate, and is no error.
func TestSignedCSRSeenStaleIsLeftAlone(t *testing.T) {
	h := hub(t)
	keys(t)
	ctx := context.Background()
	var stale *certificatesv1.CertificateSigningRequest
	rec := h.retryReconciler(t, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && stale != nil {
				stale.DeepCopyInto(csr)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && sub == "approval" {
				// What the cache shows until the published certificate's event arrives.
				defer func() { stale = csr.DeepCopy() }()
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	ledger := func() map[string]string {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := h.admin.Get(ctx, types.NamespacedName{Namespace: principalNS, Name: ledgerpkg.LedgerName("cluster1")}, cm); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return cm.Data
	}
	before := len(ledger())
	csr := h.createCSR(t, agentOf("cluster1"), csrObject("cluster1", retrySigner, requestPEM(t, p256, agentRequest("cluster1"))))
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: csr.Name}}
	if _, err := rec.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if stale == nil || len(stale.Status.Certificate) > 0 {
		t.Fatal("the test did not capture the approved, unsigned view")
	}
	if _, err := rec.Reconcile(ctx, req); err != nil {
		t.Errorf("reconciling the stale view: %v", err)
	}
	_, cert := h.waitSigned(t, csr.Name)
	after := ledger()
	if _, ok := after[pki.Fingerprint(cert)]; !ok || len(after) != before+1 {
		t.Errorf("ledger went from %d to %d entries: want one more, the published certificate %s", before, len(after), pki.Fingerprint(cert))
	}
}

// TestOneCSRCostsSixAPICalls counts what signing one agent CSR asks of the API server: the
// approval, the ledger record and the certificate (3 writes), and the live re-check of the
// owner, of the hub's AgentRevocations (one list of their metadata, which concurrent
// requests share, while the hub holds few) and of the cluster's decision page after
// recording (3 reads). Everything else comes from the cache; a renewal wave of N clusters
// costs 6N calls, not O(N) each. The hub CA is the manager's own here (labelled, so cached); a
// CA a user put in place outside the managed namespaces costs a seventh call, a live read.
func TestOneCSRCostsSixAPICalls(t *testing.T) {
	h := hub(t)
	keys(t)
	ctx := context.Background()
	caKey := types.NamespacedName{Namespace: principalNS, Name: names.CASecretName}
	setOurs := func(ours bool) {
		t.Helper()
		s := &corev1.Secret{}
		if err := h.admin.Get(ctx, caKey, s); err != nil {
			t.Fatal(err)
		}
		if ours {
			metav1.SetMetaDataLabel(&s.ObjectMeta, v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue)
		} else {
			delete(s.Labels, v1alpha1.LabelManagedBy)
		}
		if err := h.admin.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	setOurs(true)
	t.Cleanup(func() { setOurs(false) })
	eventually(t, "the CA secret is cached", func() error {
		return h.mgr.GetCache().Get(ctx, caKey, &corev1.Secret{})
	})
	// Let earlier tests' trailing work settle, then count from here.
	time.Sleep(time.Second)
	h.calls.take()
	csr := h.createCSR(t, agentOf("cluster2"), csrObject("cluster2", signerName, requestPEM(t, p256, agentRequest("cluster2"))))
	h.waitSigned(t, csr.Name)
	time.Sleep(time.Second)
	calls := h.calls.take()
	// Steps in order; the calls of one step run at the same time (the owner and the hub's
	// AgentRevocations, which hold on every principal, are read together), so within a step
	// they may come in any order.
	want := [][]string{
		{"PUT /apis/certificates.k8s.io/v1/certificatesigningrequests/" + csr.Name + "/approval"},
		{"/api/v1/namespaces/" + principalNS + "/configmaps"}, // the ledger: created or updated
		{
			"GET /apis/" + v1alpha1.GroupVersion.Group + "/v1alpha1/namespaces/gitops/gitopsclusters/fleet",
			"GET /apis/" + v1alpha1.GroupVersion.Group + "/v1alpha1/agentrevocations",
		},
		{"GET /apis/cluster.open-cluster-management.io/v1beta1/namespaces/gitops/placementdecisions/"},
		{"PUT /apis/certificates.k8s.io/v1/certificatesigningrequests/" + csr.Name + "/status"},
	}
	total := 0
	for _, step := range want {
		total += len(step)
	}
	if len(calls) != total {
		t.Fatalf("signing one CSR made %d API calls, want %d: %q", len(calls), total, calls)
	}
	if slices.ContainsFunc(calls, func(c string) bool { return strings.Contains(c, "/agentrevocations/") }) {
		t.Errorf("the cluster's AgentRevocation was read alone: %q; a hub with few revocations is read in one list", calls)
	}
	next := 0
	for i, step := range want {
		got := calls[next : next+len(step)]
		next += len(step)
		for _, w := range step {
			if !slices.ContainsFunc(got, func(c string) bool { return strings.Contains(c, w) }) {
				t.Errorf("step %d made %q, want one on %q", i+1, got, w)
			}
		}
	}
}
