package manager_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestCacheHoldsOnlyWhatTheControllersRead builds the binary's cache against a real API server
// holding objects the controllers never read, with and without managed namespaces.
func TestCacheHoldsOnlyWhatTheControllersRead(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := env.Client
	opts := manager.DefaultOptions()
	ours := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}

	for _, ns := range []string{"argocd", "elsewhere"} {
		mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helm-release"}, Data: map[string][]byte{"release": make([]byte, 4096)}})
		mustCreate(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-a", Labels: ours}})
		for _, name := range []string{opts.Fleet.PrincipalDeploymentName, "argocd-server"} {
			mustCreate(t, c, deployment(ns, name))
			mustCreate(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}})
		}
	}
	mc := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-a", Labels: map[string]string{"env": "prod"}},
		Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true,
			ManagedClusterClientConfigs: []clusterv1.ClientConfig{{URL: "https://cluster-a:6443", CABundle: make([]byte, 2048)}}},
	}
	mustCreate(t, c, mc)
	mc.Status = clusterv1.ManagedClusterStatus{
		Capacity:   clusterv1.ResourceList{"cpu": resource.MustParse("64")},
		Conditions: []metav1.Condition{{Type: clusterv1.ManagedClusterConditionAvailable, Status: metav1.ConditionTrue, Reason: "Up", LastTransitionTime: metav1.Now()}},
	}
	if err := c.Status().Update(ctx, mc); err != nil {
		t.Fatal(err)
	}

	// An agent cluster secret with its client certificate, key and CA bundle.
	agentSecret, agentCert := agentClusterSecret(t, "argocd", "cluster-a")
	mustCreate(t, c, agentSecret)

	// CSRs: this signer's only; a finished one without its request and certificate.
	pending := agentCSR(ctx, t, c, opts.Fleet.SignerName, false)
	issued := agentCSR(ctx, t, c, opts.Fleet.SignerName, true)
	foreign := agentCSR(ctx, t, c, "example.com/other", false)

	for name, managed := range map[string][]string{"no managed namespaces": nil, "managed namespace argocd": {"argocd"}} {
		t.Run(name, func(t *testing.T) {
			o := opts
			o.Fleet.ManagedNamespaces = managed
			co := manager.ControllerOptions(c.Scheme(), o).Cache
			co.Scheme = c.Scheme()
			cc, err := cache.New(env.Config, co)
			if err != nil {
				t.Fatal(err)
			}
			cctx, stop := context.WithCancel(ctx)
			defer stop()
			go func() { _ = cc.Start(cctx) }()
			if !cc.WaitForCacheSync(cctx) {
				t.Fatal("cache did not start")
			}
			// Informers start on first use; read once of each kind before waiting.
			for _, l := range []client.ObjectList{&corev1.SecretList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}, &clusterv1.ManagedClusterList{}, &certificatesv1.CertificateSigningRequestList{}} {
				if err := cc.List(ctx, l); err != nil {
					t.Fatal(err)
				}
			}

			// Kinds with one object per cluster namespace, only ever listed cluster-wide: no
			// namespace index (one set per cluster otherwise); other kinds keep theirs.
			for _, k := range []struct {
				obj  client.Object
				list client.ObjectList
				want bool
			}{
				{&addonv1alpha1.ManagedClusterAddOn{}, &addonv1alpha1.ManagedClusterAddOnList{}, false},
				{&workv1.ManifestWork{}, &workv1.ManifestWorkList{}, false},
				{&certificatesv1.CertificateSigningRequest{}, &certificatesv1.CertificateSigningRequestList{}, true},
			} {
				if err := cc.List(ctx, k.list); err != nil {
					t.Fatalf("listing %T cluster-wide: %v", k.obj, err)
				}
				inf, err := cc.GetInformer(ctx, k.obj)
				if err != nil {
					t.Fatal(err)
				}
				indexed, ok := inf.(toolscache.SharedIndexInformer)
				if !ok {
					t.Fatalf("the informer of %T is a %T", k.obj, inf)
				}
				if _, has := indexed.GetIndexer().GetIndexers()[toolscache.NamespaceIndex]; has != k.want {
					t.Errorf("%T: namespace index %v, want %v", k.obj, has, k.want)
				}
			}

			cached := func(obj client.Object, ns, name string) bool {
				t.Helper()
				err := cc.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
				return err == nil
			}
			// The project's own Secrets are cached where the manager works.
			if !cached(&corev1.Secret{}, "argocd", "cluster-a") {
				t.Error("the project's own Secret in argocd is not cached")
			}
			// A Helm release in the principal namespace is cached only when that namespace is
			// managed (the manager then watches a user's own CA there); nowhere else.
			if got, want := cached(&corev1.Secret{}, "argocd", "helm-release"), managed != nil; got != want {
				t.Errorf("unrelated Secret in argocd cached = %v, want %v", got, want)
			}
			if cached(&corev1.Secret{}, "elsewhere", "helm-release") {
				t.Error("an unrelated Secret outside the managed namespaces is cached")
			}
			// An agent cluster secret: its name and server, and which certificate it holds, but
			// no private key, certificate or bundle copy of its own.
			compact := &corev1.Secret{}
			if err := cc.Get(ctx, types.NamespacedName{Namespace: "argocd", Name: agentSecret.Name}, compact); err != nil {
				t.Fatal(err)
			}
			if string(compact.Data["name"]) != "cluster-a" || len(compact.Data["server"]) == 0 {
				t.Errorf("cached agent cluster secret lost its name or server: %v", compact.Data)
			}
			if _, ok := compact.Data["config"]; ok {
				t.Error("cached agent cluster secret keeps its config with the private key")
			}
			if !bytes.Contains(compact.Data["#certificate"], []byte(pki.Fingerprint(agentCert))) {
				t.Errorf("cached agent cluster secret does not name its certificate: %q", compact.Data["#certificate"])
			}
			// A write from the compact copy is refused instead of wiping the credentials.
			if err := c.Update(ctx, compact); !apierrors.IsInvalid(err) {
				t.Errorf("update from the cache's compact copy: got %v, want Invalid", err)
			}
			// Deployments and Services: the principal's only.
			if !cached(&appsv1.Deployment{}, "argocd", opts.Fleet.PrincipalDeploymentName) || !cached(&corev1.Service{}, "argocd", opts.Fleet.PrincipalServiceName) {
				t.Error("the principal's Deployment or Service is not cached")
			}
			if cached(&appsv1.Deployment{}, "argocd", "argocd-server") || cached(&corev1.Service{}, "argocd", "argocd-server") {
				t.Error("a Deployment or Service other than the principal's is cached")
			}
			// ManagedClusters: labels, acceptance and conditions; not their CA bundles or capacity.
			got := &clusterv1.ManagedCluster{}
			if err := cc.Get(ctx, types.NamespacedName{Name: "cluster-a"}, got); err != nil {
				t.Fatal(err)
			}
			if got.Labels["env"] != "prod" || !got.Spec.HubAcceptsClient || len(got.Status.Conditions) != 1 {
				t.Errorf("cached ManagedCluster lost what is read: labels %v, accepted %v, conditions %v", got.Labels, got.Spec.HubAcceptsClient, got.Status.Conditions)
			}
			if len(got.Spec.ManagedClusterClientConfigs) != 0 || len(got.Status.Capacity) != 0 || len(got.ManagedFields) != 0 {
				t.Errorf("cached ManagedCluster keeps what nothing reads: %d client configs, capacity %v, %d managed fields",
					len(got.Spec.ManagedClusterClientConfigs), got.Status.Capacity, len(got.ManagedFields))
			}
			if cached(&certificatesv1.CertificateSigningRequest{}, "", foreign.Name) {
				t.Error("another signer's CSR is cached")
			}
			open := &certificatesv1.CertificateSigningRequest{}
			if err := cc.Get(ctx, types.NamespacedName{Name: pending.Name}, open); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(open.Spec.Request, pending.Spec.Request) || !slices.Equal(open.Spec.Groups, pending.Spec.Groups) {
				t.Error("an open CSR lost its request or its requester's groups in the cache")
			}
			done := &certificatesv1.CertificateSigningRequest{}
			if err := cc.Get(ctx, types.NamespacedName{Name: issued.Name}, done); err != nil {
				t.Fatal(err)
			}
			if !signer.IsFinal(done) {
				t.Error("an issued CSR no longer reads as issued in the cache")
			}
			if len(done.Spec.Request) != 0 || len(done.Spec.Groups) != 0 || len(done.Status.Certificate) > 1 || done.Spec.Username != "" ||
				len(done.Spec.Usages) != 0 || done.Status.Conditions[0].Message != "" {
				t.Errorf("an issued CSR keeps what nothing reads: request %d bytes, %d groups, certificate %d bytes, username %q, usages %v, condition message %q",
					len(done.Spec.Request), len(done.Spec.Groups), len(done.Status.Certificate), done.Spec.Username, done.Spec.Usages, done.Status.Conditions[0].Message)
			}
			if done.Spec.SignerName != issued.Spec.SignerName || done.Labels[signer.ClusterNameLabel] != "cluster-a" || done.Status.Conditions[0].Reason != "Test" {
				t.Errorf("an issued CSR lost what is read of it: signer %q, labels %v, conditions %v", done.Spec.SignerName, done.Labels, done.Status.Conditions)
			}
		})
	}
}

// agentClusterSecret builds the Argo CD cluster secret of cluster's agent as the GitOpsCluster
// reconciler writes it, and returns its client certificate.
func agentClusterSecret(t *testing.T, ns, cluster string) (*corev1.Secret, *x509.Certificate) {
	t.Helper()
	ca, err := pki.NewCA("hub", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.IssueClientCert(pkix.Name{CommonName: cluster}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	config, err := json.Marshal(map[string]any{"tlsClientConfig": map[string][]byte{"certData": kp.CertPEM, "keyData": kp.KeyPEM, "caData": ca.CertPEM}})
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agentsecret.Name(cluster), Labels: map[string]string{
			v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelSecretType: "cluster", v1alpha1.LabelAgentName: cluster,
		}},
		Data: map[string][]byte{"name": []byte(cluster), "server": []byte("https://resource-proxy:9090?agentName=" + cluster), "config": config},
	}, kp.Cert
}

// agentCSR creates an agent's CSR for signerName, approved and issued when issued is set.
func agentCSR(ctx context.Context, t *testing.T, c client.Client, signerName string, issued bool) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	csr, err := testenv.AgentCSR("cluster-a", "cluster-a", "argocd-agent-addon", signerName)
	if err != nil {
		t.Fatal(err)
	}
	csr.Spec.Username, csr.Spec.Groups = "agent", []string{"system:authenticated"}
	mustCreate(t, c, csr)
	if !issued {
		return csr
	}
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "approved by the test"}}
	if err := c.SubResource("approval").Update(ctx, csr); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.NewCA("test", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(csr.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if csr.Status.Certificate, _, err = ca.SignClientCertificate(req.PublicKey, req.Subject, req.DNSNames, time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(ctx, csr); err != nil {
		t.Fatal(err)
	}
	return csr
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func deployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
}
