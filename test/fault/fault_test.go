// Package fault runs the manager binary against a real API server and breaks things while it
// works: SIGKILLs at random points while a fleet converges and while a configuration change
// rolls out, an API server restart in the middle of a reconcile, an API server restart under a
// leader with the default timings (which must keep its lease), the loss of the leader of two
// replicas, and a principal Service that loses its address for a moment. Every case ends by
// checking the state a clean run leaves: nothing orphaned, nothing duplicated, no agent revoked.
//
// FAULT_KILLS (default 5) sets the number of kills per phase and FAULT_CLUSTERS (default 500)
// the fleet size; `make fault` runs more. Each run prints its random seed (FAULT_SEED replays it).
package fault

import (
	"context"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const addonName = "argocd-agent-addon"

var (
	env        *testenv.Env
	hub        client.Client
	dir        string
	kubeconfig string
	managerBin string
	runs       int
)

func TestMain(m *testing.M) {
	if os.Getenv("FAULT_SKIP") != "" {
		os.Exit(0)
	}
	code, err := setUp(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fault suite:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setUp(m *testing.M) (int, error) {
	// The manager runs as its own process; envtest's messages are not needed.
	ctrllog.SetLogger(logr.Discard())
	var err error
	if dir, err = os.MkdirTemp("", "fault-"); err != nil {
		return 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if managerBin, err = testenv.BuildManager(dir); err != nil {
		return 0, err
	}
	if env, err = testenv.Start(testenv.Options{}); err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	hub = env.Client
	if kubeconfig, err = env.KubeconfigFile(dir); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func seeded(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("FAULT_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("FAULT_SEED=%d", seed)
	return rand.New(rand.NewPCG(seed, seed))
}

// manager is one manager process; exited is closed once it has exited (a process that exited
// but was not waited for would still accept signals, as a zombie).
type manager struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

func startManager(t *testing.T, extra ...string) *manager {
	t.Helper()
	runs++
	log := filepath.Join(dir, fmt.Sprintf("%s-%d.log", strings.ReplaceAll(t.Name(), "/", "_"), runs))
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"manager", "--kubeconfig=" + kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--departure-settle=2s", "--zap-log-level=info"}, extra...)
	cmd := exec.Command(managerBin, args...)
	cmd.Env = append(os.Environ(), testenv.ProjectProcessEnv()...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &manager{cmd: cmd, log: log, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(m.exited)
	}()
	t.Cleanup(m.kill)
	return m
}

// kill sends SIGKILL: no graceful shutdown, no lease release, writes cut off mid-flight.
func (m *manager) kill() {
	if !m.alive() {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
}

func (m *manager) alive() bool {
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// requireAlive fails the test with the end of the manager's log when it has exited.
func (m *manager) requireAlive(t *testing.T, when string) {
	t.Helper()
	if m.alive() {
		return
	}
	out, _ := os.ReadFile(m.log)
	if len(out) > 3000 {
		out = out[len(out)-3000:]
	}
	t.Fatalf("the manager exited %s (%v); the end of its log:\n%s", when, m.cmd.ProcessState, out)
}

func eventually(t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	poll.Until(t, what, timeout, check)
}

// fleetFixture is a namespace with a Placement over n fake clusters and a GitOpsCluster.
type fleetFixture struct {
	ns       string
	clusters []string
}

func newFleet(t *testing.T, ns, prefix string, n int, mutate func(*v1alpha1.GitOpsCluster)) *fleetFixture {
	t.Helper()
	ctx := context.Background()
	f := &fleetFixture{ns: ns, clusters: fakehub.Names(prefix, n)}
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := fakehub.CreateClusters(ctx, hub, f.clusters, fakehub.Options{Addon: addonName}); err != nil {
		t.Fatal(err)
	}
	if err := hub.Create(ctx, &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}}); err != nil {
		t.Fatal(err)
	}
	if err := fakehub.SetDecisions(ctx, hub, ns, "p", f.clusters); err != nil {
		t.Fatal(err)
	}
	g := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: v1alpha1.GitOpsClusterSpec{PlacementRef: v1alpha1.PlacementReference{Kind: v1alpha1.PlacementKind, Name: "p"},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{Mode: v1alpha1.AgentModeManaged, PrincipalServerAddress: "principal.example.com"}}}
	if mutate != nil {
		mutate(g)
	}
	if err := hub.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fleetFixture) goc(t *testing.T) *v1alpha1.GitOpsCluster {
	t.Helper()
	g := &v1alpha1.GitOpsCluster{}
	if err := hub.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: "fleet"}, g); err != nil {
		t.Fatal(err)
	}
	return g
}

// grow adds n new clusters to the fixture's Placement, as OCM would write them.
func (f *fleetFixture) grow(t *testing.T, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	more := fakehub.Names(prefix, n)
	if err := fakehub.CreateClusters(ctx, hub, more, fakehub.Options{Addon: addonName}); err != nil {
		t.Fatal(err)
	}
	f.clusters = append(f.clusters, more...)
	if err := fakehub.SetDecisions(ctx, hub, f.ns, "p", f.clusters); err != nil {
		t.Fatal(err)
	}
}

// waitConverged waits until the GitOpsCluster describes its current spec and is Ready with
// every agent.
func (f *fleetFixture) waitConverged(t *testing.T, timeout time.Duration) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s: Ready with %d agents", f.ns, len(f.clusters)), timeout, func() error {
		g := f.goc(t)
		if g.Status.ObservedGeneration != g.Generation || !meta.IsStatusConditionTrue(g.Status.Conditions, v1alpha1.ConditionReady) ||
			int(g.Status.AvailableAgents) != len(f.clusters) {
			return fmt.Errorf("generation %d/%d, available %d, conditions %+v", g.Status.ObservedGeneration, g.Generation, g.Status.AvailableAgents, g.Status.Conditions)
		}
		return nil
	})
}

// checkCleanState asserts what a clean run leaves: one cluster secret per selected cluster,
// each verifying against the hub CA; one CMA entry naming the GitOpsCluster's template and
// config; one template and one config; nothing blocked, nothing in the revocation record.
func (f *fleetFixture) checkCleanState(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	g := f.goc(t)
	var secrets corev1.SecretList
	if err := hub.List(ctx, &secrets, client.InNamespace(f.ns), client.MatchingLabels{v1alpha1.LabelSecretType: "cluster"}); err != nil {
		t.Fatal(err)
	}
	caSecret := &corev1.Secret{}
	if err := hub.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: names.CASecretName}, caSecret); err != nil {
		t.Fatal(err)
	}
	bundle, err := pki.ParseCertificates(caSecret.Data["ca.crt"])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, c := range f.clusters {
		want[agentsecret.Name(c)] = true
	}
	versions := map[string]string{}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		if !want[s.Name] {
			t.Errorf("unexpected cluster secret %s", s.Name)
			continue
		}
		delete(want, s.Name)
		versions[s.Name] = s.ResourceVersion
		cert := agentsecret.Certificate(s)
		if cert == nil {
			t.Errorf("%s holds no certificate", s.Name)
			continue
		}
		if err := pki.VerifyChain(cert, bundle, x509.ExtKeyUsageClientAuth, time.Now()); err != nil {
			t.Errorf("%s: certificate does not verify against the hub CA bundle: %v", s.Name, err)
		}
	}
	if len(want) > 0 {
		t.Errorf("%d cluster secrets missing, e.g. %v", len(want), firstKeys(want, 3))
	}

	cma := &addonv1alpha1.ClusterManagementAddOn{}
	if err := hub.Get(ctx, types.NamespacedName{Name: addonName}, cma); err != nil {
		t.Fatal(err)
	}
	entries := 0
	for _, p := range cma.Spec.InstallStrategy.Placements {
		if p.Namespace != f.ns {
			continue
		}
		entries++
		for _, c := range p.Configs {
			if (c.Resource == "addontemplates" && c.Name != g.Status.AddOnTemplate) ||
				(c.Resource == "addondeploymentconfigs" && c.Name != g.Status.AddOnDeploymentConfig) {
				t.Errorf("CMA entry names %s %s, status names template %s and config %s", c.Resource, c.Name, g.Status.AddOnTemplate, g.Status.AddOnDeploymentConfig)
			}
		}
	}
	if entries != 1 {
		t.Errorf("%d CMA entries for namespace %s, want 1", entries, f.ns)
	}
	owner := client.MatchingLabels{v1alpha1.LabelOwnerNamespace: f.ns, v1alpha1.LabelOwnerName: "fleet"}
	var templates addonv1alpha1.AddOnTemplateList
	if err := hub.List(ctx, &templates, owner); err != nil {
		t.Fatal(err)
	}
	var adcs addonv1alpha1.AddOnDeploymentConfigList
	if err := hub.List(ctx, &adcs, client.InNamespace(f.ns), owner); err != nil {
		t.Fatal(err)
	}
	// The agent's template and the Argo CD components' template.
	if len(templates.Items) != 2 || len(adcs.Items) != 1 {
		t.Errorf("%d AddOnTemplates and %d AddOnDeploymentConfigs, want two templates and one config", len(templates.Items), len(adcs.Items))
	}
	store := ledger.Store{Client: hub, Reader: hub, Namespace: f.ns}
	if bl, err := store.Blocklist(ctx); err != nil || len(bl) > 0 {
		t.Errorf("%d certificates blocked (err %v): a selected agent was revoked", len(bl), err)
	}
	if revoked, err := store.Revoked(ctx, time.Now()); err != nil || len(revoked) > 0 {
		t.Errorf("%d entries in the revocation record (err %v)", len(revoked), err)
	}
	return versions
}

func firstKeys(m map[string]bool, n int) []string {
	var out []string
	for k := range m {
		if len(out) == n {
			break
		}
		out = append(out, k)
	}
	return out
}

// TestKillsWhileConvergingAndRollingOut: SIGKILL at random points while a fleet converges,
// then again while a configuration change rolls out; the end state is a clean run's.
func TestKillsWhileConvergingAndRollingOut(t *testing.T) {
	rng := seeded(t)
	kills := envInt("FAULT_KILLS", 5)
	n := envInt("FAULT_CLUSTERS", 500)
	f := newFleet(t, "kills", "kl-", n, nil)

	killAtRandom := func(phase string) {
		m := startManager(t)
		for i := range kills {
			wait := time.Duration(300+rng.IntN(2500)) * time.Millisecond
			time.Sleep(wait)
			m.kill()
			t.Logf("%s: SIGKILL %d of %d after %s", phase, i+1, kills, wait)
			m = startManager(t)
		}
	}
	killAtRandom("converging")
	f.waitConverged(t, 5*time.Minute)
	before := f.checkCleanState(t)
	oldConfig := f.goc(t).Status.AddOnDeploymentConfig

	g := f.goc(t)
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.ArgoCDAgentAddon.Image = "registry.example.com/argocd-agent:v2"
	if err := hub.Patch(context.Background(), g, patch); err != nil {
		t.Fatal(err)
	}
	killAtRandom("rolling out")
	f.waitConverged(t, 5*time.Minute)
	eventually(t, "the new config in use, the old one pruned", time.Minute, func() error {
		g := f.goc(t)
		if g.Status.AddOnDeploymentConfig == oldConfig {
			return fmt.Errorf("still config %s", oldConfig)
		}
		adc := &addonv1alpha1.AddOnDeploymentConfig{}
		if err := hub.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: oldConfig}, adc); err == nil {
			return fmt.Errorf("old config %s still there", oldConfig)
		}
		return nil
	})
	after := f.checkCleanState(t)
	rewritten := 0
	for name, rv := range before {
		if after[name] != rv {
			rewritten++
		}
	}
	if rewritten > 0 {
		t.Errorf("a configuration change rewrote %d cluster secrets", rewritten)
	}
}

// TestAPIServerRestartMidReconcile: the hub API server goes away while the manager registers a
// fleet; the manager recovers by itself (same process) and keeps following changes.
func TestAPIServerRestartMidReconcile(t *testing.T) {
	m := startManager(t)
	f := newFleet(t, "restart", "rs-", 300, nil)
	time.Sleep(1500 * time.Millisecond) // mid-reconcile: 300 cluster secrets take several seconds
	if err := env.RestartAPIServer(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	f.waitConverged(t, 3*time.Minute)
	m.requireAlive(t, "instead of recovering")
	// Watches resumed: a change made after the restart is followed.
	f.grow(t, "rs-late-", 20)
	f.waitConverged(t, 2*time.Minute)
	f.checkCleanState(t)
	m.requireAlive(t, "after the restart")
}

// TestLeaderKeepsTheLeaseThroughAnAPIServerRestart: a leader with the default timings rides
// out a hub API server restart (15 s down) without losing its lease (controller-runtime's defaults
// give up after 10 s and exit), then keeps following changes.
func TestLeaderKeepsTheLeaseThroughAnAPIServerRestart(t *testing.T) {
	const leaseName = "fault-outage"
	lease := func() *coordinationv1.Lease { return heldLease(leaseName) }
	m := startManager(t, "--leader-elect", "--leader-election-namespace=default", "--leader-election-id="+leaseName)
	var before *coordinationv1.Lease
	eventually(t, "the manager leads", 30*time.Second, func() error {
		if before = lease(); before == nil {
			return fmt.Errorf("no lease holder yet")
		}
		return nil
	})
	f := newFleet(t, "outage", "ou-", 20, nil)
	f.waitConverged(t, 2*time.Minute)

	// 15 s down, plus the stop and the start: past the old 10-s renew deadline, within the
	// default timings' tolerance even when the restart is slow.
	down := time.Now()
	if err := env.RestartAPIServer(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("the API server was away for %s", time.Since(down).Round(time.Second))
	m.requireAlive(t, "while the API server was down")
	f.grow(t, "ou-late-", 10)
	f.waitConverged(t, 2*time.Minute)
	m.requireAlive(t, "after the API server came back")
	after := lease()
	if after == nil || *after.Spec.HolderIdentity != *before.Spec.HolderIdentity ||
		ptr.Deref(after.Spec.LeaseTransitions, 0) != ptr.Deref(before.Spec.LeaseTransitions, 0) {
		t.Errorf("the lease changed hands: before %+v, after %+v", before.Spec, after)
	}
	f.checkCleanState(t)
}

// heldLease returns the leader-election Lease name in default while someone holds it, else nil.
func heldLease(name string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	if err := hub.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, l); err != nil || l.Spec.HolderIdentity == nil {
		return nil
	}
	return l
}

// TestLeaderFailover: two replicas elect a leader; killing it lets the other take over and
// converge a change made after the kill.
func TestLeaderFailover(t *testing.T) {
	ha := []string{"--leader-elect", "--leader-election-namespace=default", "--leader-election-id=fault-failover",
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s"}
	holder := func() string {
		if l := heldLease("fault-failover"); l != nil {
			return *l.Spec.HolderIdentity
		}
		return ""
	}
	// The first replica alone takes the lease; the second waits as a standby.
	leader := startManager(t, ha...)
	var first string
	eventually(t, "the first replica leads", 30*time.Second, func() error {
		if first = holder(); first == "" {
			return fmt.Errorf("no lease holder yet")
		}
		return nil
	})
	startManager(t, ha...)
	f := newFleet(t, "failover", "lf-", 100, nil)
	f.waitConverged(t, 2*time.Minute)
	leader.kill()
	t.Logf("killed the leader %s", first)

	f.grow(t, "lf-late-", 30)
	f.waitConverged(t, 2*time.Minute)
	if now := holder(); now == "" || now == first {
		t.Errorf("the lease is held by %q, not by the standby", now)
	}
	f.checkCleanState(t)
}

// TestPrincipalServiceLosesItsAddress: the principal's load balancer loses its address for a
// moment and gets it back; the principal is not restarted, its certificate not re-issued, and
// no new configuration rolls to the fleet.
func TestPrincipalServiceLosesItsAddress(t *testing.T) {
	ctx := context.Background()
	startManager(t)
	const ns = "blip"
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-principal"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "principal"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "principal"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "principal", Image: "quay.io/argoprojlabs/argocd-agent:v0.9.0"}}}}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-principal"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	f := newFleet(t, ns, "bl-", 20, func(g *v1alpha1.GitOpsCluster) { g.Spec.ArgoCDAgentAddon.PrincipalServerAddress = "" })
	for _, o := range []client.Object{dep, svc} {
		if err := hub.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	setIngress := func(ip string) {
		t.Helper()
		s := &corev1.Service{}
		if err := hub.Get(ctx, client.ObjectKeyFromObject(svc), s); err != nil {
			t.Fatal(err)
		}
		s.Status.LoadBalancer.Ingress = nil
		if ip != "" {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		}
		if err := hub.Status().Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	setIngress("192.0.2.10")
	f.waitConverged(t, 2*time.Minute)

	snapshot := func() (config, stamp, tlsVersion string) {
		d := &appsv1.Deployment{}
		if err := hub.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			t.Fatal(err)
		}
		tls := &corev1.Secret{}
		if err := hub.Get(ctx, types.NamespacedName{Namespace: ns, Name: names.PrincipalTLSSecretName}, tls); err != nil {
			t.Fatal(err)
		}
		return f.goc(t).Status.AddOnDeploymentConfig, d.Spec.Template.Annotations[v1alpha1.AnnotationPrincipalTLSHash], tls.ResourceVersion
	}
	config0, stamp0, tls0 := snapshot()

	setIngress("")
	eventually(t, "the last known endpoint is kept and said so", 30*time.Second, func() error {
		c := meta.FindStatusCondition(f.goc(t).Status.Conditions, v1alpha1.ConditionPrincipalDiscovered)
		if c == nil || c.Reason != v1alpha1.ReasonPrincipalLastKnown {
			return fmt.Errorf("PrincipalDiscovered = %+v", c)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	setIngress("192.0.2.10")
	eventually(t, "discovered again", 30*time.Second, func() error {
		c := meta.FindStatusCondition(f.goc(t).Status.Conditions, v1alpha1.ConditionPrincipalDiscovered)
		if c == nil || c.Reason != v1alpha1.ReasonPrincipalFromService {
			return fmt.Errorf("PrincipalDiscovered = %+v", c)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if config, stamp, tls := snapshot(); config != config0 || stamp != stamp0 || tls != tls0 {
		t.Errorf("the blip changed things: config %s -> %s, principal restart stamp %q -> %q, serving certificate version %s -> %s",
			config0, config, stamp0, stamp, tls0, tls)
	}
}
