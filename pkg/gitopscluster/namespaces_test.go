package gitopscluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
)

// TestPrincipalNamespaceOutsideManagedNamespaces runs one reconcile with a manager limited to
// other namespaces: the GitOpsCluster says why nothing was issued, and no Secret is written.
func TestPrincipalNamespaceOutsideManagedNamespaces(t *testing.T) {
	ctx := context.Background()
	ns := "unmanaged"
	createNamespace(t, ns)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1)

	stopManager()
	defer startManager()
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	cfg := testConfig()
	cfg.ManagedNamespaces = []string{"somewhere-else"}
	recorded := &eventCounter{}
	r := &gitopscluster.Reconciler{Client: k8s, Config: cfg, Recorder: recorded}
	key := types.NamespacedName{Namespace: ns, Name: "fleet"}
	for range 4 { // the first pass adds the finalizer
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	// The first pass said it; the passes after it found nothing new to say.
	if n := recorded.count(v1alpha1.ReasonNamespaceNotManaged); n != 1 {
		t.Errorf("%d %s Events over four passes that found the same thing, want 1", n, v1alpha1.ReasonNamespaceNotManaged)
	}
	g := getGOC(t, ns, "fleet")
	c := findCond(g, v1alpha1.ConditionCertificatesReady)
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonNamespaceNotManaged || !strings.Contains(c.Message, "--managed-namespaces") {
		t.Errorf("CertificatesReady = %s/%s: %s", c.Status, c.Reason, c.Message)
	}
	if r := findCond(g, v1alpha1.ConditionReady); r.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %s", r.Status)
	}
	if s := clusterSecrets(t, ns); s.Len() > 0 {
		t.Errorf("secrets written: %v", s.UnsortedList())
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.CASecretName}, &corev1.Secret{}); err == nil {
		t.Error("a CA secret was written in an unmanaged namespace")
	}
}

// TestGitOpsClusterOutsideManagedNamespacesCanBeDeleted: with the binary's cache (Secrets only
// in the managed namespaces), a GitOpsCluster whose principal namespace is elsewhere still
// gets its finalizer removed when deleted.
func TestGitOpsClusterOutsideManagedNamespacesCanBeDeleted(t *testing.T) {
	ctx := context.Background()
	ns := "unmanaged-delete"
	createNamespace(t, ns)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 0)
	stopManager()
	startManagerWith(func(o *manager.Options) { o.Fleet.ManagedNamespaces = []string{"somewhere-else"} })
	defer func() { stopManager(); startManager() }()

	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotManaged)
	if err := k8s.Delete(ctx, &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the GitOpsCluster is gone", func() error {
		err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "fleet"}, &v1alpha1.GitOpsCluster{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

// TestPrincipalPKIIsWrittenByItsElderOnly: two GitOpsClusters share a principal namespace. The
// younger one's pass writes nothing of the principal's PKI: it waits (PrincipalPKIPending,
// naming the elder) until the elder's pass has written it, then uses that very CA.
func TestPrincipalPKIIsWrittenByItsElderOnly(t *testing.T) {
	ctx := context.Background()
	ns := "pki-elder"
	createNamespace(t, ns)
	createPlacement(t, ns, "p1")
	setDecisions(t, ns, "p1", 0)
	createPlacement(t, ns, "p2")
	setDecisions(t, ns, "p2", 0)

	stopManager()
	defer startManager()
	createGitOpsCluster(t, ns, "a-elder", "p1", withAddress("principal.example.com"))
	createGitOpsCluster(t, ns, "b-younger", "p2", withAddress("principal.example.com"))
	// One pass at a time, by hand, through a cache with the manager's field indexes.
	cacheCtx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	informers, err := cache.New(env.Config, cache.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ownership.SetupIndexes(ctx, informers); err != nil {
		t.Fatal(err)
	}
	go func() { _ = informers.Start(cacheCtx) }()
	cached, err := client.New(env.Config, client.Options{Scheme: k8s.Scheme(), Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		t.Fatal(err)
	}
	r := &gitopscluster.Reconciler{Client: cached, APIReader: k8s, Config: testConfig()}
	pass := func(name string) {
		t.Helper()
		key := types.NamespacedName{Namespace: ns, Name: name}
		for range 2 { // the first pass adds the finalizer
			before := getGOC(t, ns, name).ResourceVersion
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
				t.Fatal(err)
			}
			// The next pass reads what this one wrote.
			eventually(t, "the cache has the pass's writes", func() error {
				g := &v1alpha1.GitOpsCluster{}
				if err := cached.Get(ctx, key, g); err != nil {
					return err
				}
				if now := getGOC(t, ns, name).ResourceVersion; g.ResourceVersion != now && now != before {
					return fmt.Errorf("cache at %s, server at %s", g.ResourceVersion, now)
				}
				return nil
			})
		}
	}
	pass("b-younger")
	c := findCond(getGOC(t, ns, "b-younger"), v1alpha1.ConditionCertificatesReady)
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonPrincipalPKIPending || !strings.Contains(c.Message, ns+"/a-elder") {
		t.Errorf("the younger one's CertificatesReady = %s/%s: %s", c.Status, c.Reason, c.Message)
	}
	for _, name := range []string{names.CASecretName, names.PrincipalTLSSecretName, names.ResourceProxySecretName, names.JWTSecretName} {
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("the younger GitOpsCluster's pass wrote %s (err %v)", name, err)
		}
	}

	pass("a-elder")
	ca := &corev1.Secret{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.CASecretName}, ca); err != nil {
		t.Fatalf("the elder wrote no CA: %v", err)
	}
	pass("b-younger")
	if c := findCond(getGOC(t, ns, "b-younger"), v1alpha1.ConditionCertificatesReady); c.Status != metav1.ConditionTrue {
		t.Errorf("the younger one's CertificatesReady = %s/%s: %s", c.Status, c.Reason, c.Message)
	}
	after := &corev1.Secret{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.CASecretName}, after); err != nil || after.ResourceVersion != ca.ResourceVersion {
		t.Errorf("the CA secret changed in the younger one's pass (err %v)", err)
	}
}

// failingServiceReads fails every read of a Service, as an API server that is briefly away
// would for one kind.
type failingServiceReads struct{ client.Client }

func (c failingServiceReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Service); ok {
		return fmt.Errorf("the API server is away")
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestAPassStoppedByAnErrorSaysSoInReady: a pass that stops on an error before writing any
// status records it: Ready False, ReconcileError, naming the step and the error.
func TestAPassStoppedByAnErrorSaysSoInReady(t *testing.T) {
	ctx := context.Background()
	ns := "pass-error"
	createNamespace(t, ns)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 0)
	stopManager()
	defer startManager()
	// No principal address: the pass discovers the principal from its Service.
	createGitOpsCluster(t, ns, "fleet", "p")
	r := &gitopscluster.Reconciler{Client: failingServiceReads{k8s}, APIReader: k8s, Config: testConfig()}
	key := types.NamespacedName{Namespace: ns, Name: "fleet"}
	var err error
	for range 2 { // the first pass adds the finalizer
		_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	}
	if err == nil || !strings.Contains(err.Error(), "the API server is away") {
		t.Fatalf("the pass returned %v", err)
	}
	c := findCond(getGOC(t, ns, "fleet"), v1alpha1.ConditionReady)
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonReconcileError || !strings.Contains(c.Message, "discovery: ") || !strings.Contains(c.Message, "the API server is away") {
		t.Errorf("Ready = %s/%s: %s", c.Status, c.Reason, c.Message)
	}
}

// eventCounter is an EventRecorder that counts Events by reason.
type eventCounter struct {
	mu       sync.Mutex
	byReason map[string]int
}

func (e *eventCounter) Eventf(_ runtime.Object, _ runtime.Object, _, reason, _, _ string, _ ...interface{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byReason == nil {
		e.byReason = map[string]int{}
	}
	e.byReason[reason]++
}

func (e *eventCounter) count(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byReason[reason]
}
