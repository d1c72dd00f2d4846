package signer_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// The envtest API server and the signer are started by the first test that needs them (see
// hub), so the pure tests, the benchmark and the fuzz target run without them.

const (
	addonName = addon.DefaultAddonName
	gitopsNS  = "gitops"
	// principalNS holds the CA of the "fleet", "custom" and "notpl" GitOpsClusters.
	principalNS = "argocd"
	// retrySigner is served only by Reconcilers the tests call by hand.
	retrySigner = "retry.example.com/argocd-agent"
	caValidity  = 10 * 24 * time.Hour
)

var signerName = addon.DefaultSignerName

type hubFixture struct {
	env   *testenv.Env
	admin client.Client
	// mgr is the running manager; rec is the signer it runs.
	mgr  ctrl.Manager
	rec  *signer.Reconciler
	stop func()
	// ca signs for the GitOpsClusters whose principal namespace is principalNS.
	ca *pki.KeyPair
	// calls records the manager's API requests other than watches, as "METHOD path".
	calls callLog
}

type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") != "true" {
			l.mu.Lock()
			l.calls = append(l.calls, req.Method+" "+req.URL.Path)
			l.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// take returns the requests recorded since the last take.
func (l *callLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

var (
	hubOnce sync.Once
	theHub  *hubFixture
	hubErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if theHub != nil {
		theHub.stop()
		_ = theHub.env.Stop()
	}
	os.Exit(code)
}

// hub returns the shared API server with the fixtures below and a running signer.
//
//   - GitOpsCluster gitops/fleet (principal argocd, clientCertificateValidity 48h) selects
//     cluster1, cluster2, cluster3 and argocd; its template also registers retrySigner.
//   - gitops/custom (principal argocd) selects cluster-custom; its template was edited to name a subject.
//   - gitops/notpl (principal argocd) selects cluster-notpl and has no template.
//   - gitops/othersigner (principal argocd) selects cluster-othersigner; its template uses another signer.
//   - gitops/noca (principal noca-principal, no CA secret there) selects cluster-noca.
//   - ManagedCluster lonely is selected by nobody; there is no ManagedCluster ghost.
func hub(t testing.TB) *hubFixture {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a kube-apiserver; skipped with -short")
	}
	hubOnce.Do(func() { theHub, hubErr = startHub() })
	if hubErr != nil {
		t.Fatalf("starting the test hub: %v", hubErr)
	}
	return theHub
}

func startHub() (*hubFixture, error) {
	level := zapcore.ErrorLevel
	if os.Getenv("TEST_VERBOSE") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(level)))
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		return nil, err
	}
	h := &hubFixture{env: env, admin: env.Client, stop: func() {}}
	if err := h.setUp(); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return h, nil
}

func (h *hubFixture) setUp() error {
	ctx := context.Background()
	c := h.admin
	// OCM lets managed clusters' registration agents create CSRs; here anyone authenticated may.
	if err := c.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-requester"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"},
			Verbs: []string{"create", "get", "list", "watch"}}},
	}); err != nil {
		return err
	}
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-requester"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "csr-requester"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}},
	}); err != nil {
		return err
	}

	clusters := []string{"cluster1", "cluster2", "cluster3", "argocd", "cluster-custom", "cluster-notpl", "cluster-othersigner", "cluster-noca", "lonely"}
	for _, ns := range append([]string{gitopsNS, "noca-principal"}, clusters...) {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if ns == principalNS || ns == "noca-principal" {
			// The principal namespaces let the GitOpsClusters of gitopsNS use them.
			obj.Annotations = map[string]string{v1alpha1.AnnotationAllowedGitOpsClusterNamespaces: gitopsNS}
		}
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for _, n := range clusters {
		if err := c.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}); err != nil {
			return err
		}
	}

	var err error
	if h.ca, err = pki.NewCA("argocd-agent-ca", caValidity, time.Now()); err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: principalNS, Name: names.CASecretName},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: h.ca.CertPEM, corev1.TLSPrivateKeyKey: h.ca.KeyPEM, "ca.crt": h.ca.CertPEM},
	}); err != nil {
		return err
	}

	type gocSpec struct {
		name, principal string
		clusters        []string
		template        func(*addon.TemplateInput) // nil: no template
		extra           func(*addonv1alpha1.AddOnTemplate)
		mutate          func(*v1alpha1.GitOpsCluster)
	}
	keep := func(*addon.TemplateInput) {}
	specs := []gocSpec{
		{name: "fleet", principal: principalNS, clusters: []string{"cluster1", "cluster2", "cluster3", "argocd"}, template: keep,
			extra: func(t *addonv1alpha1.AddOnTemplate) {
				reg := t.Spec.Registration[0].DeepCopy()
				reg.CustomSigner.SignerName = retrySigner
				t.Spec.Registration = append(t.Spec.Registration, *reg)
			},
			mutate: func(g *v1alpha1.GitOpsCluster) {
				g.Spec.ArgoCDAgentAddon.ClientCertificateValidity = &metav1.Duration{Duration: 48 * time.Hour}
			}},
		// A template edited to name another identity.
		{name: "custom", principal: principalNS, clusters: []string{"cluster-custom"}, template: keep,
			extra: func(t *addonv1alpha1.AddOnTemplate) {
				t.Spec.Registration[0].CustomSigner.Subject = &addonv1alpha1.Subject{User: customUser, Groups: []string{"argocd-agents"}, OrganizationUnits: []string{"gitops"}}
			}},
		{name: "notpl", principal: principalNS, clusters: []string{"cluster-notpl"}},
		{name: "othersigner", principal: principalNS, clusters: []string{"cluster-othersigner"}, template: func(in *addon.TemplateInput) {
			in.SignerName = "other.example.com/argocd-agent"
		}},
		{name: "noca", principal: "noca-principal", clusters: []string{"cluster-noca"}, template: keep},
	}
	for _, s := range specs {
		goc := &v1alpha1.GitOpsCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: gitopsNS, Name: s.name},
			Spec: v1alpha1.GitOpsClusterSpec{
				PlacementRef:     v1alpha1.PlacementReference{Kind: v1alpha1.PlacementKind, Name: s.name},
				ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{Mode: v1alpha1.AgentModeManaged, PrincipalNamespace: s.principal},
			},
		}
		if s.mutate != nil {
			s.mutate(goc)
		}
		if err := c.Create(ctx, goc); err != nil {
			return fmt.Errorf("creating GitOpsCluster %s: %w", s.name, err)
		}
		if err := setDecisions(ctx, c, s.name, s.clusters...); err != nil {
			return err
		}
		if s.template == nil {
			continue
		}
		in := addon.TemplateInput{
			AddonName: addonName, TemplateName: names.TemplateName(goc), SignerName: signerName,
			SigningCANamespace: s.principal,
			CABundlePEM:        h.ca.CertPEM, Mode: addon.ModeManaged,
		}
		s.template(&in)
		tpl, err := addon.BuildAddOnTemplate(in)
		if err != nil {
			return err
		}
		if s.extra != nil {
			s.extra(tpl)
		}
		if err := c.Create(ctx, tpl); err != nil {
			return fmt.Errorf("creating AddOnTemplate of %s: %w", s.name, err)
		}
	}
	return h.startSigner()
}

func (h *hubFixture) startSigner() error {
	ctx, cancel := context.WithCancel(context.Background())
	opts := manager.DefaultOptions()
	// The binary's cache and client options, so the tests see the cache a user runs.
	mo := manager.ControllerOptions(h.admin.Scheme(), opts)
	mo.Metrics = metricsserver.Options{BindAddress: "0"}
	mo.HealthProbeBindAddress = "0"
	mo.LeaderElection = false
	cfg := rest.CopyConfig(h.env.Config)
	cfg.WrapTransport = h.calls.wrap
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		cancel()
		return err
	}
	if err := ownership.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		cancel()
		return err
	}
	h.rec = &signer.Reconciler{Config: signer.DefaultConfig()}
	if err := h.rec.SetupWithManager(mgr); err != nil {
		cancel()
		return err
	}
	h.mgr = mgr
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	h.stop = func() { cancel(); <-done }
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("manager cache did not sync")
	}
	return nil
}

// setDecisions makes the PlacementDecision of placement list exactly clusters.
func setDecisions(ctx context.Context, c client.Client, placement string, clusters ...string) error {
	return fakehub.SetDecisionPage(ctx, c, gitopsNS, placement, 0, clusters)
}

// --- requesters -------------------------------------------------------------------------

const customUser = "argocd-agent-custom-user"

// identity is who creates a CSR; the API server copies it into spec.username and spec.groups.
type identity struct {
	user   string
	groups []string
}

// agentOf is the registration agent of cluster as OCM's hub sees it.
func agentOf(cluster string) identity {
	return identity{
		user:   signer.RequesterPrefix(cluster) + "agent1",
		groups: []string{signer.ClusterGroup(cluster), "system:open-cluster-management:managed-clusters"},
	}
}

// as returns a client that impersonates id (the envtest admin may impersonate anyone).
func (h *hubFixture) as(t testing.TB, id identity) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(h.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: id.user, Groups: id.groups}
	c, err := client.New(cfg, client.Options{Scheme: h.admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// --- CSRs ---------------------------------------------------------------------------------

var (
	keyOnce                 sync.Once
	p256, p256b             *ecdsa.PrivateKey
	rsa2048, rsa1024, rsaCA *rsa.PrivateKey
	keyErr                  error
)

func keys(t testing.TB) {
	t.Helper()
	keyOnce.Do(func() {
		var errs [5]error
		p256, errs[0] = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		p256b, errs[1] = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		rsa2048, errs[2] = rsa.GenerateKey(rand.Reader, 2048)
		rsa1024, errs[3] = rsa.GenerateKey(rand.Reader, 1024)
		rsaCA, errs[4] = rsa.GenerateKey(rand.Reader, 2048)
		keyErr = errors.Join(errs[:]...)
	})
	if keyErr != nil {
		t.Fatal(keyErr)
	}
}

// agentRequest is what OCM's registration agent of cluster asks for by default.
func agentRequest(cluster string) *x509.CertificateRequest {
	return &x509.CertificateRequest{
		Subject: pkix.Name{
			CommonName:   signer.DefaultAgentUser(cluster, addonName),
			Organization: signer.DefaultAgentGroups(cluster, addonName),
		},
		DNSNames: []string{signer.AddonDNSName(addonName)},
	}
}

func requestPEM(t testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// csrObject is a CSR as OCM's registration agent makes it for cluster.
func csrObject(cluster, signerName string, request []byte) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "addon-" + cluster + "-" + addonName + "-",
			Labels:       map[string]string{signer.ClusterNameLabel: cluster, signer.AddonNameLabel: addonName},
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    request,
			SignerName: signerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth},
		},
	}
}

func (h *hubFixture) createCSR(t testing.TB, id identity, csr *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	if err := h.as(t, id).Create(context.Background(), csr); err != nil {
		t.Fatalf("creating CSR as %s: %v", id.user, err)
	}
	return csr
}

func (h *hubFixture) getCSR(t testing.TB, name string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := h.admin.Get(context.Background(), types.NamespacedName{Name: name}, csr); err != nil {
		t.Fatal(err)
	}
	return csr
}

func condition(csr *certificatesv1.CertificateSigningRequest, ct certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range csr.Status.Conditions {
		if csr.Status.Conditions[i].Type == ct {
			return &csr.Status.Conditions[i]
		}
	}
	return nil
}

func final(csr *certificatesv1.CertificateSigningRequest) bool {
	return len(csr.Status.Certificate) > 0 || condition(csr, certificatesv1.CertificateFailed) != nil ||
		condition(csr, certificatesv1.CertificateDenied) != nil
}

// waitFinal waits until the CSR carries a certificate or a Failed/Denied condition.
func (h *hubFixture) waitFinal(t testing.TB, name string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	var csr *certificatesv1.CertificateSigningRequest
	eventually(t, "CSR "+name+" decided", func() error {
		csr = h.getCSR(t, name)
		if !final(csr) {
			return fmt.Errorf("still pending: %+v", csr.Status.Conditions)
		}
		return nil
	})
	return csr
}

// waitSigned waits for the certificate and returns it parsed.
func (h *hubFixture) waitSigned(t testing.TB, name string) (*certificatesv1.CertificateSigningRequest, *x509.Certificate) {
	t.Helper()
	csr := h.waitFinal(t, name)
	if len(csr.Status.Certificate) == 0 {
		t.Fatalf("CSR %s was not signed: %+v", name, csr.Status.Conditions)
	}
	block, rest := pem.Decode(csr.Status.Certificate)
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("status.certificate is not exactly one PEM certificate: %q", csr.Status.Certificate)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return csr, cert
}

func eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	poll.Until(t, what, 30*time.Second, check)
}
