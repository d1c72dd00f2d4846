package fleetmetrics

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	gitopsconfig "github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.Now()}
}

// tlsSecret is a kubernetes.io/tls Secret holding cert.
func tlsSecret(ns, name string, kp *pki.KeyPair) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: names.ManagedLabels()}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: kp.CertPEM, corev1.TLSPrivateKeyKey: kp.KeyPEM}}
}

// TestCollectorReportsStatusBlocklistAndCertificates: two GitOpsClusters share a principal,
// a third names one outside the managed namespaces. Each GitOpsCluster's status counts and
// conditions are reported as they stand; the shared principal's blocklist and certificates
// once, and nothing of the unmanaged one.
func TestCollectorReportsStatusBlocklistAndCertificates(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := pki.NewCA("argocd-agent-ca", 365*24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.IssueServerCert("argocd-agent-principal", []string{"argocd-agent-principal"}, nil, 30*24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	fleetA := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "gitops", Name: "fleet-a"},
		Spec: v1alpha1.GitOpsClusterSpec{ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{PrincipalNamespace: "argocd"}},
		Status: v1alpha1.GitOpsClusterStatus{SelectedClusters: 5, AvailableAgents: 3, AgentsOnOtherVersion: 1, RevokedAgents: 2, PendingDepartures: 4,
			Conditions: []metav1.Condition{condition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotReady),
				condition(v1alpha1.ConditionRevocationPaused, metav1.ConditionTrue, v1alpha1.ReasonTooManyDepartures)}}}
	fleetB := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "fleet-b"},
		Status: v1alpha1.GitOpsClusterStatus{SelectedClusters: 2, AvailableAgents: 2,
			Conditions: []metav1.Condition{condition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady),
				condition(v1alpha1.ConditionAgentsAvailable, metav1.ConditionUnknown, v1alpha1.ReasonAgentsUnavailable)}}}
	elsewhere := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "fleet-c"}}
	blocklist := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: ledger.BlocklistName},
		Data: map[string]string{strings.Repeat("A", 64): "", strings.Repeat("B", 64): ""}}
	objs := []client.Object{fleetA, fleetB, elsewhere, blocklist,
		tlsSecret("argocd", names.CASecretName, ca), tlsSecret("argocd", names.PrincipalTLSSecretName, serving),
		// Out of the managed namespaces: never read.
		tlsSecret("other", names.CASecretName, ca)}
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(objs...).WithStatusSubresource(&v1alpha1.GitOpsCluster{}).Build()
	for _, goc := range []*v1alpha1.GitOpsCluster{fleetA, fleetB} {
		st := goc.Status
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(goc), goc); err != nil {
			t.Fatal(err)
		}
		goc.Status = st
		if err := c.Status().Update(context.Background(), goc); err != nil {
			t.Fatal(err)
		}
	}
	cfg := gitopsconfig.Default()
	cfg.ManagedNamespaces = []string{"argocd", "gitops"}
	col := &Collector{Client: c, Config: cfg}

	want := fmt.Sprintf(`
# HELP %[1]s Managed clusters the GitOpsCluster's Placement selects (status.selectedClusters).
# TYPE %[1]s gauge
%[1]s{gitopscluster="fleet-a",gitopscluster_namespace="gitops"} 5
%[1]s{gitopscluster="fleet-b",gitopscluster_namespace="argocd"} 2
%[1]s{gitopscluster="fleet-c",gitopscluster_namespace="other"} 0
# HELP %[2]s Selected clusters whose argocd-agent is available, by its ManagedClusterAddOn (status.availableAgents).
# TYPE %[2]s gauge
%[2]s{gitopscluster="fleet-a",gitopscluster_namespace="gitops"} 3
%[2]s{gitopscluster="fleet-b",gitopscluster_namespace="argocd"} 2
%[2]s{gitopscluster="fleet-c",gitopscluster_namespace="other"} 0
# HELP %[3]s Selected clusters whose agent runs another version than the principal, which argocd-agent refuses (status.agentsOnOtherVersion).
# TYPE %[3]s gauge
%[3]s{gitopscluster="fleet-a",gitopscluster_namespace="gitops"} 1
%[3]s{gitopscluster="fleet-b",gitopscluster_namespace="argocd"} 0
%[3]s{gitopscluster="fleet-c",gitopscluster_namespace="other"} 0
# HELP %[4]s Clusters of spec.revokedClusters whose agent is revoked (status.revokedAgents).
# TYPE %[4]s gauge
%[4]s{gitopscluster="fleet-a",gitopscluster_namespace="gitops"} 2
%[4]s{gitopscluster="fleet-b",gitopscluster_namespace="argocd"} 0
%[4]s{gitopscluster="fleet-c",gitopscluster_namespace="other"} 0
# HELP %[5]s Clusters that left the selection and whose agents are revoked once the departure is confirmed or approved (status.pendingDepartures).
# TYPE %[5]s gauge
%[5]s{gitopscluster="fleet-a",gitopscluster_namespace="gitops"} 4
%[5]s{gitopscluster="fleet-b",gitopscluster_namespace="argocd"} 0
%[5]s{gitopscluster="fleet-c",gitopscluster_namespace="other"} 0
# HELP %[6]s The GitOpsCluster's status conditions by type, with their current reason: 1 when True, 0 when False or Unknown.
# TYPE %[6]s gauge
%[6]s{condition="Ready",gitopscluster="fleet-a",gitopscluster_namespace="gitops",reason="NotReady"} 0
%[6]s{condition="RevocationPaused",gitopscluster="fleet-a",gitopscluster_namespace="gitops",reason="TooManyDepartures"} 1
%[6]s{condition="Ready",gitopscluster="fleet-b",gitopscluster_namespace="argocd",reason="Ready"} 1
%[6]s{condition="AgentsAvailable",gitopscluster="fleet-b",gitopscluster_namespace="argocd",reason="SomeUnavailable"} 0
# HELP %[7]s Client certificates on the principal's TLS blocklist (keys of the argocd-agent-tls-blocklist ConfigMap).
# TYPE %[7]s gauge
%[7]s{principal_namespace="argocd"} 2
# HELP %[8]s Bytes the principal's TLS blocklist uses, counted as its capacity is.
# TYPE %[8]s gauge
%[8]s{principal_namespace="argocd"} %[9]d
# HELP %[10]s Bytes the principal's TLS blocklist may use (it stays well under etcd's object size limit); a revocation that does not fit is not blocked.
# TYPE %[10]s gauge
%[10]s{principal_namespace="argocd"} %[11]d
# HELP %[12]s When the certificate of a principal's PKI Secret (the CA, the principal's and the resource proxy's serving certificates) expires, in seconds since the epoch.
# TYPE %[12]s gauge
%[12]s{principal_namespace="argocd",secret="argocd-agent-ca"} %[13]d
%[12]s{principal_namespace="argocd",secret="argocd-agent-principal-tls"} %[14]d
# HELP %[15]s Reads of the manager's cache that failed while these metrics were collected; series are missing from those scrapes.
# TYPE %[15]s counter
%[15]s 0
`, MetricSelectedClusters, MetricAvailableAgents, MetricAgentsOtherVersion, MetricRevokedAgents, MetricPendingDepartures, MetricCondition,
		MetricBlocklistEntries, MetricBlocklistBytes, ledger.BlocklistBytes(blocklist.Data), MetricBlocklistCapacity, ledger.BlocklistBudget,
		MetricCertificateExpiry, ca.Cert.NotAfter.Unix(), serving.Cert.NotAfter.Unix(), MetricReadErrors)
	if err := testutil.CollectAndCompare(col, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// The blocklist's size is what the budget counts, not zero: the test would pass on an
	// empty blocklist otherwise.
	if ledger.BlocklistBytes(blocklist.Data) == 0 {
		t.Fatal("the test's blocklist has no size")
	}
	// A second scrape reports the same: the parsed expiries are remembered, not lost.
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), MetricCertificateExpiry); err != nil {
		t.Errorf("second scrape: %v", err)
	}
	if problems, err := testutil.CollectAndLint(col); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// TestCollectorReadsUnlabelledPKISecretsLive: without managed namespaces the cache holds only
// the project's own Secrets, so a CA the user put in place is read past it, as the PKI keeper
// reads it; a principal without PKI yet reports an empty blocklist and no certificate.
func TestCollectorReadsUnlabelledPKISecretsLive(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("users-ca", 90*24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "fleet"}}
	fresh := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "new", Name: "fleet"}}
	users := tlsSecret("argocd", names.CASecretName, ca)
	users.Labels = nil
	cached := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(goc, fresh).Build()
	live := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(users).Build()
	col := &Collector{Client: cached, Reader: live, Config: gitopsconfig.Default()}
	want := fmt.Sprintf(`
# HELP %[1]s When the certificate of a principal's PKI Secret (the CA, the principal's and the resource proxy's serving certificates) expires, in seconds since the epoch.
# TYPE %[1]s gauge
%[1]s{principal_namespace="argocd",secret="argocd-agent-ca"} %[2]d
# HELP %[3]s Client certificates on the principal's TLS blocklist (keys of the argocd-agent-tls-blocklist ConfigMap).
# TYPE %[3]s gauge
%[3]s{principal_namespace="argocd"} 0
%[3]s{principal_namespace="new"} 0
`, MetricCertificateExpiry, ca.Cert.NotAfter.Unix(), MetricBlocklistEntries)
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), MetricCertificateExpiry, MetricBlocklistEntries); err != nil {
		t.Error(err)
	}
}

// failingReader fails every read, as a cache that cannot answer would.
type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("cache unavailable")
}

// TestCollectorCountsFailedReadsAndStillServes: a read that fails leaves its series out and is
// counted; the scrape itself still succeeds (an invalid metric would fail all of /metrics).
func TestCollectorCountsFailedReadsAndStillServes(t *testing.T) {
	col := &Collector{Client: failingReader{}, Config: gitopsconfig.Default()}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(col); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("gather: %v", err)
	}
	// The comparison gathers a second time: both failed reads are counted.
	want := fmt.Sprintf(`
# HELP %[1]s Reads of the manager's cache that failed while these metrics were collected; series are missing from those scrapes.
# TYPE %[1]s counter
%[1]s 2
`, MetricReadErrors)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestCollectorReportsOnlyWhileItRuns: Start registers the collector and takes it out when its
// context ends (the replica stops leading); a second one in the same registry stays out.
func TestCollectorReportsOnlyWhileItRuns(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := fake.NewClientBuilder().WithScheme(scheme(t)).Build()
	stayedOut := make(chan string, 1)
	first := &Collector{Client: c, Config: gitopsconfig.Default(), Registerer: reg}
	second := &Collector{Client: c, Config: gitopsconfig.Default(), Registerer: reg,
		Log: funcr.New(func(_, args string) { stayedOut <- args }, funcr.Options{})}
	if !first.NeedLeaderElection() {
		t.Error("the collector must run only on the leader")
	}
	registered := func() bool {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == MetricReadErrors {
				return true
			}
		}
		return false
	}
	ctx1, stop1 := context.WithCancel(context.Background())
	done1 := make(chan error)
	go func() { done1 <- first.Start(ctx1) }()
	deadline := time.Now().Add(10 * time.Second)
	for !registered() {
		if time.Now().After(deadline) {
			t.Fatal("the collector was not registered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx2, stop2 := context.WithCancel(context.Background())
	done2 := make(chan error)
	go func() { done2 <- second.Start(ctx2) }()
	select {
	case <-stayedOut:
	case <-time.After(10 * time.Second):
		t.Fatal("the second collector did not find the first registered")
	}
	stop1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	if registered() {
		t.Error("the collector still reports after its context ended")
	}
	stop2()
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
}
