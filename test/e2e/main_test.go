package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/chartrender"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// Names shared by the scenarios.
const (
	// ns is the binding namespace of the fleet's cluster set, the GitOpsCluster's namespace and
	// (by default) the principal namespace.
	ns         = "open-cluster-management"
	gocName    = "my-gitops-cluster"
	placement  = "argocd-placement"
	addonName  = "argocd-agent-addon"
	signerName = "open-cluster-management.io/argocd-agent-addon"
	agentNS    = "argocd"
	// imageTag is the project image's tag in the fleet's registry.
	imageTag = "e2e"
	// agentCertValidity is the manager's --agent-cert-validity: the signer's minimum (1h).
	// Scenario 4 forces a renewal instead of waiting for one (see there why a shorter test
	// lifetime would not help with OCM v1.2.1).
	agentCertValidity = time.Hour
	// selectLabel is put on each ManagedCluster (value = its name) so that the Placement can
	// select clusters by name with a requiredClusterSelector.
	selectLabel = "e2e.argocd-agent-addon.io/cluster"
	// managerDepartureSettle is the manager's --departure-settle.
	managerDepartureSettle = 5 * time.Second
	// requestTimeout bounds each API request of the scenarios' clients, so that a hung request
	// fails its step rather than the package's timeout.
	requestTimeout = time.Minute
)

// scenario is one test of a lane.
type scenario struct {
	name string
	run  func(*testing.T, *suite)
}

// The scenarios run on three fleets at once, a lane each, in the order listed. A scenario
// spends most of its time waiting on kubelets, OCM's agents and Argo CD's controllers, so
// fleets side by side take little longer than one; the split keeps the lanes' durations
// close (seconds measured on 2 cores), and make test gives go test -parallel 3 so that all
// three start at once. Within a lane the scenarios share the fleet and the manager, and each
// leaves the fleet as it found it, except where a scenario says otherwise.

// TestAgentScenarios runs what the agents and components go through on the managed
// clusters: Argo CD's components from the addon and the agent's life from registration to
// removal.
func TestAgentScenarios(t *testing.T) {
	runLane(t, "agents", []scenario{
		{"ArgoCDComponents", testArgoCDComponents},                         // ~65 s
		{"ArgoCDComponentsClusterLabel", testArgoCDComponentsClusterLabel}, // ~16 s
		{"FleetE2E", testFleetE2E},                                         // ~260 s
	})
}

// TestArgoCDScenarios runs what Argo CD drives: Applications synced by Argo CD's pods,
// ApplicationSets and cluster registrations on the hub, the config management plugin, and the
// pull model's Applications through a klusterlet's outage.
func TestArgoCDScenarios(t *testing.T) {
	runLane(t, "argocd", []scenario{
		{"ArgoCDApplication", testArgoCDApplication},                                                     // ~75 s
		{"ArgoCDApplicationSet", testArgoCDApplicationSet},                                               // ~55 s
		{"ArgoCDClusterRegistrationForApplicationSets", testArgoCDClusterRegistrationForApplicationSets}, // ~25 s
		{"CMPDeliversAFolderWithoutArgoCD", testCMPDeliversAFolderWithoutArgoCD},                         // ~1 s
		{"CMPPluginInHubArgoCD", testCMPPluginInHubArgoCD},                                               // ~115 s
		{"PullModelSurvivesAnOutage", testPullModelSurvivesAnOutage},                                     // ~100 s
	})
}

// TestPullModelScenarios runs the basic pull model's ApplicationSet rollout through OCM's work
// agents to the clusters' own Argo CD, then two short scenarios that need only a fleet and its
// manager (a cluster's own Argo CD that the components addon leaves alone, the manager's pod):
// without them this lane is the shortest.
func TestPullModelScenarios(t *testing.T) {
	runLane(t, "pullmodel", []scenario{
		{"PullModelApplicationSet", testPullModelApplicationSet},   // 300 to 390 s
		{"ForeignArgoCDIsLeftAlone", testForeignArgoCDIsLeftAlone}, // ~40 s
		{"ManagerPodSpec", testManagerPodSpec},                     // ~30 s
	})
}

// runLane starts the lane's fleet and manager once one of its scenarios is selected, runs
// them in order as subtests, and tears the fleet down.
func runLane(t *testing.T, lane string, scenarios []scenario) {
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	var selected []scenario
	for _, sc := range scenarios {
		if runSelects(t.Name(), sc.name) {
			selected = append(selected, sc)
		}
	}
	if len(selected) == 0 {
		t.Skip("no scenario of this lane selected by -run")
	}
	t.Parallel()
	s, err := setUp(lane)
	if err != nil {
		t.Fatalf("%s: setting up: %v", lane, err)
	}
	t.Cleanup(func() {
		if err := s.tearDown(); err != nil {
			t.Errorf("%s: tearing down: %v", lane, err)
		}
	})
	for _, sc := range selected {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, s) })
	}
}

// runSelects reports whether -run selects the test named by names (the top-level test, then
// its subtests). It reads the pattern's slash-separated parts as go test does, so that a lane
// starts no fleet when none of its scenarios would run; a pattern it cannot read selects
// everything.
func runSelects(names ...string) bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	parts := strings.Split(f.Value.String(), "/")
	for i, name := range names {
		if i >= len(parts) {
			return true
		}
		re, err := regexp.Compile(parts[i])
		if err != nil {
			return true
		}
		if !re.MatchString(name) {
			return false
		}
	}
	return true
}

// skipWhy says why the suite is skipped; empty when it runs.
var skipWhy string

// prepared is what every lane uses, built once while their fleets start: the project's
// binary for this machine and the images.
var prepared *builds

type builds struct {
	tmp  string
	done chan struct{}
	// managerBin is the project's binary built for this machine, for the commands a person
	// runs (status, cmp generate); the manager itself runs as the chart's pod.
	managerBin string
	images     nodeapps.Images
	err        error
}

func startBuilds(tmp string) *builds {
	b := &builds{tmp: tmp, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		// Generous: on a machine with empty caches the project compiles beside every other
		// package of make test.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		imgs, errs := nodeapps.StartBuild(ctx, tmp, imageTag, logf).Wait()
		b.managerBin, b.images, b.err = imgs.ManagerBinary, imgs, errors.Join(errs...)
	}()
	return b
}

func (b *builds) wait() error {
	<-b.done
	return b.err
}

type suite struct {
	// lane names the suite's fleet in logs.
	lane   string
	f      *fleet.Fleet
	hub    client.Client
	spokes map[string]client.Client
	// managerBin is the project's binary built for this machine (builds.managerBin).
	managerBin string
	started    time.Time

	// Images in the fleet's registry. reloaderImg is the project's image: the manager's and
	// the cert-reloader's (the chart's --reloader-image). agentImage is the stand-in for
	// argocd-agent's image (test/node/images/argocd-agent) tagged as the default release, which
	// the scenarios' GitOpsClusters name with spec.argoCDAgentAddon.image; previousAgentImage
	// is the same image tagged as the previous supported release.
	// guestbookImg1 and guestbookImg2 are two tags of the hello test image the guestbook runs.
	reloaderImg, agentImage, previousAgentImage, guestbookImg1, guestbookImg2 string

	// Filled in by the scenarios for later ones.
	mu sync.Mutex
	// issued are the fingerprints of every client certificate seen on each cluster, in order.
	issued map[string][]string
	// spokeArgoNS are the clusters whose own Argo CD a pull-model scenario moved out of the
	// agent's namespace (moveSpokeArgoCD).
	spokeArgoNS map[string]string
}

func TestMain(m *testing.M) {
	flag.Parse()
	// The API server warns that Argo CD's finalizer name has no path; the suite's clients would
	// print that through controller-runtime's unset logger as a stack trace.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	requested, nodesErr := node.Requested()
	switch {
	case testing.Short():
		skipWhy = "starts local OCM fleets on real nodes; skipped with -short"
	case os.Getenv("FLEET_E2E") == "0":
		skipWhy = "FLEET_E2E=0: local OCM fleet tests disabled"
	case !requested:
		skipWhy = node.SkipReason
	case !runSelects("TestAgentScenarios") && !runSelects("TestArgoCDScenarios") && !runSelects("TestPullModelScenarios"):
		skipWhy = "no e2e test selected by -run"
	}
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		skipWhy = "listing tests"
	}
	if skipWhy != "" {
		return m.Run()
	}
	if nodesErr != nil {
		// Asked for and impossible: a skip would report a pass that tested nothing.
		fmt.Fprintf(os.Stderr, "e2e: %s=1 but real nodes cannot run here: %v\n", node.RequestedEnv, nodesErr)
		return 1
	}
	tmp, err := os.MkdirTemp("", "argocd-agent-addon-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	prepared = startBuilds(tmp)
	code := m.Run()
	// A lane that failed early leaves the builds running: they must end before tmp goes.
	_ = prepared.wait()
	return code
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// setUp starts the lane's fleet on real nodes (the project's CRDs go onto the hub with
// OCM's), adds the images built meanwhile to it, then installs the chart with Helm's SDK, as
// a hub admin does: the manager runs as the chart's pod.
func setUp(lane string) (*suite, error) {
	s := &suite{lane: lane, spokes: map[string]client.Client{}, issued: map[string][]string{}, spokeArgoNS: map[string]string{}, started: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	f, err := fleet.Start(ctx, fleet.Options{
		Clusters:         []string{"cluster1", "cluster2"},
		BindingNamespace: ns,
		HubCRDPaths:      []string{filepath.Join(testenv.RepoRoot(), "manifests", "crds")},
		Logf:             s.logf,
		RealNodes:        true,
		// The fleets start while make test compiles every package: with empty caches the
		// machine is loaded far beyond its cores for minutes.
		StartTimeout: 10 * time.Minute,
	})
	if err != nil {
		return nil, err
	}
	s.f = f
	if err := prepared.wait(); err != nil {
		_ = s.tearDown()
		return nil, err
	}
	s.managerBin = prepared.managerBin
	imagesStart := time.Now()
	if err := nodeapps.AddToFleet(ctx, f, prepared.images); err != nil {
		_ = s.tearDown()
		return nil, err
	}
	s.logf("images added to the fleet in %s", time.Since(imagesStart).Round(100*time.Millisecond))
	reg := f.RegistryHost()
	s.reloaderImg = nodeapps.ManagerRepository(reg) + ":" + imageTag
	releases := version.Pairs()
	s.agentImage, s.previousAgentImage = nodeapps.StandInAgentRef(reg, releases[0].Agent), nodeapps.StandInAgentRef(reg, releases[1].Agent)
	s.guestbookImg1, s.guestbookImg2 = nodeapps.HelloRef(reg, 1), nodeapps.HelloRef(reg, 2)
	if err := s.connect(); err != nil {
		_ = s.tearDown()
		return nil, err
	}
	if err := s.installChart(ctx); err != nil {
		_ = s.tearDown()
		return nil, err
	}
	s.logf("manager's pod Ready; fleet ready %s after start; logs in %s", time.Since(s.started).Round(100*time.Millisecond), f.LogDir())
	return s, nil
}

// logf logs with the lane's name: the lanes' fleets log into one stream.
func (s *suite) logf(format string, args ...any) {
	logf("%s: %s", s.lane, fmt.Sprintf(format, args...))
}

// installChart is the hub admin's steps: the namespaces the chart's RBAC goes into, then
// `helm install` of the chart (through Helm's SDK, waiting as --wait does) with the manager's
// image from the fleet's registry, which is also the managed clusters' mirror
// (spoke.imageRegistry).
func (s *suite) installChart(ctx context.Context) error {
	if err := fleet.EnsureNamespaces(ctx, s.hub, ns, fleet.ArgoCDNamespace, tenantNS); err != nil {
		return err
	}
	values := nodeapps.ChartValues(s.f.RegistryHost(), imageTag)
	for k, v := range map[string]any{
		// The hub Argo CD's namespace too: ArgoCDClusterRegistrations write cluster secrets there.
		"managedNamespaces": []any{ns, fleet.ArgoCDNamespace},
		"pullModel": map[string]any{
			"namespaces": []any{fleet.ArgoCDNamespace, tenantNS},
			// Short, for the pull model's offline-deletion scenario.
			"offlineReleaseAfter": "15s",
		},
		"applicationSet": map[string]any{"placementGenerator": map[string]any{"enabled": true}},
		"signer":         map[string]any{"certificateValidity": agentCertValidity.String()},
		"revocation":     map[string]any{"departureSettle": managerDepartureSettle.String()},
	} {
		values[k] = v
	}
	start := time.Now()
	rel, err := chartrender.Install(s.f.HubKubeconfigPath(), filepath.Join(testenv.RepoRoot(), "charts", "argocd-agent-addon"), ns, testenv.ChartRelease,
		values, 5*time.Minute, s.logf)
	if err != nil {
		return fmt.Errorf("helm install: %w\n%s", err, nodeapps.PodReport(ctx, s.f, "hub", ns))
	}
	s.logf("helm install %s (revision %d): the manager's pod is Ready after %s", rel.Name, rel.Version, time.Since(start).Round(100*time.Millisecond))
	return nil
}

func (s *suite) connect() error {
	scheme := fleet.Scheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	var err error
	if s.hub, err = client.New(withRequestTimeout(s.f.HubConfig()), client.Options{Scheme: scheme}); err != nil {
		return err
	}
	for _, c := range s.f.Clusters() {
		if s.spokes[c], err = client.New(withRequestTimeout(s.f.SpokeConfig(c)), client.Options{Scheme: scheme}); err != nil {
			return err
		}
	}
	return nil
}

func withRequestTimeout(cfg *rest.Config) *rest.Config {
	cfg.Timeout = requestTimeout
	return cfg
}

func (s *suite) tearDown() error {
	var err error
	if s.f != nil && s.hub != nil {
		err = s.keepManagerLog()
	}
	if s.f != nil {
		// Every component the scenarios started (OCM's, Argo CD's, the manager) ran with the
		// identity a real install gives it.
		masters, mErr := s.f.PrivilegedKubeconfigs()
		if mErr == nil && len(masters) > 0 {
			mErr = fmt.Errorf("fleet components authenticated in system:masters: %v", masters)
		}
		err = errors.Join(err, mErr, s.f.Stop())
	}
	return err
}

// scheme is the scheme of the suite's clients.
func (s *suite) scheme() *runtime.Scheme { return s.hub.Scheme() }

// recordIssued remembers a client certificate fingerprint seen on a cluster.
func (s *suite) recordIssued(cluster, fp string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, have := range s.issued[cluster] {
		if have == fp {
			return
		}
	}
	s.issued[cluster] = append(s.issued[cluster], fp)
}

func (s *suite) issuedTo(cluster string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.issued[cluster]...)
}
