package gitopscluster_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// departureSettle is the manager's settle period in these tests.
const departureSettle = 3 * time.Second

var (
	env   *testenv.Env
	k8s   client.Client
	clock = &fakeClock{now: time.Now()}
	// stopManager stops the running manager; startManager starts a fresh one.
	stopManager func()
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func testConfig() config.Config {
	cfg := config.Default()
	cfg.ReloaderImage = "argocd-agent-addon:test"
	cfg.Now = clock.Now
	cfg.DepartureSettle = departureSettle
	// Small, so that every test with more clusters gets its probes over several passes.
	cfg.ProbesPerPass = probesPerPass
	return cfg
}

// probesPerPass is the suite's Config.ProbesPerPass.
const probesPerPass = 3

func startManager() { startManagerWith(nil) }

// startManagerWith starts a manager built like the binary's, with edit applied to its options.
func startManagerWith(edit func(*manager.Options)) { startManagerOn(env.Config, edit) }

// startManagerOn starts it against cfg (a test may wrap env.Config's transport).
func startManagerOn(cfg *rest.Config, edit func(*manager.Options)) {
	opts := manager.DefaultOptions()
	opts.Fleet = testConfig()
	if edit != nil {
		edit(&opts)
	}
	stop, err := testenv.StartManager(cfg, k8s.Scheme(), opts)
	if err != nil {
		panic(err)
	}
	stopManager = stop
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(0)
	}
	ctrl.SetLogger(testLogger())
	var err error
	env, err = testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	startManager()
	code := m.Run()
	stopManager()
	_ = env.Stop()
	os.Exit(code)
}

// --- fixtures ---------------------------------------------------------------

func createNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(context.Background(), ns); err != nil && !isAlreadyExists(err) {
		t.Fatal(err)
	}
}

func createManagedClusters(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
		if err := k8s.Create(context.Background(), mc); err != nil && !isAlreadyExists(err) {
			t.Fatal(err)
		}
		if len(validation.IsDNS1123Label(n)) == 0 {
			createNamespace(t, n)
		}
	}
}

func createPlacement(t *testing.T, ns, name string) {
	t.Helper()
	p := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// setDecisions writes a PlacementDecision page of placement with the given clusters.
func setDecisions(t *testing.T, ns, placement string, page int, clusters ...string) {
	t.Helper()
	if err := fakehub.SetDecisionPage(context.Background(), k8s, ns, placement, page, clusters); err != nil {
		t.Fatal(err)
	}
}

func createGitOpsCluster(t *testing.T, ns, name, placement string, mutate ...func(*v1alpha1.GitOpsCluster)) *v1alpha1.GitOpsCluster {
	t.Helper()
	g := &v1alpha1.GitOpsCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.GitOpsClusterSpec{
			PlacementRef:     v1alpha1.PlacementReference{Kind: v1alpha1.PlacementKind, Name: placement},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{Mode: v1alpha1.AgentModeManaged},
		},
	}
	for _, m := range mutate {
		m(g)
	}
	if err := k8s.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	return g
}

func withAddress(addr string) func(*v1alpha1.GitOpsCluster) {
	return func(g *v1alpha1.GitOpsCluster) { g.Spec.ArgoCDAgentAddon.PrincipalServerAddress = addr }
}

// fleetOfOne creates namespace ns, the ManagedCluster cluster, a Placement "pl" that decides
// it, and the GitOpsCluster "fleet" on it, which it returns.
func fleetOfOne(t *testing.T, ns, cluster string) *v1alpha1.GitOpsCluster {
	t.Helper()
	createNamespace(t, ns)
	createManagedClusters(t, cluster)
	createPlacement(t, ns, "pl")
	setDecisions(t, ns, "pl", 1, cluster)
	createGitOpsCluster(t, ns, "fleet", "pl", withAddress("principal.example.com"))
	return getGOC(t, ns, "fleet")
}

// eventually polls check until it returns nil or the timeout passes.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	poll.Until(t, what, 30*time.Second, check)
}

// consistently fails the test if check returns an error within d.
func consistently(t *testing.T, what string, d time.Duration, check func() error) {
	t.Helper()
	poll.Consistently(t, what, d, check)
}

func getGOC(t *testing.T, ns, name string) *v1alpha1.GitOpsCluster {
	t.Helper()
	g := &v1alpha1.GitOpsCluster{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, g); err != nil {
		t.Fatal(err)
	}
	return g
}

// conditionIs waits for condition type t to have status s and (when non-empty) reason.
func conditionIs(t *testing.T, ns, name, condType string, s metav1.ConditionStatus, reason string) *v1alpha1.GitOpsCluster {
	t.Helper()
	var g *v1alpha1.GitOpsCluster
	eventually(t, fmt.Sprintf("%s/%s condition %s=%s (%s)", ns, name, condType, s, reason), func() error {
		g = getGOC(t, ns, name)
		c := meta.FindStatusCondition(g.Status.Conditions, condType)
		if c == nil {
			return fmt.Errorf("no condition %s yet; conditions: %+v", condType, g.Status.Conditions)
		}
		if c.Status != s || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("condition is %s/%s: %s", c.Status, c.Reason, c.Message)
		}
		if c.ObservedGeneration != g.Generation {
			return fmt.Errorf("condition is for generation %d, object is at %d", c.ObservedGeneration, g.Generation)
		}
		return nil
	})
	return g
}
