package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// Names shared by the scenarios.
const (
	// ns is the binding namespace of the fleet's cluster set, the GitOpsCluster's namespace and
	// (by default) the principal namespace.
	ns           = "open-cluster-management"
	gocName      = "my-gitops-cluster"
	placement    = "argocd-placement"
	addonName    = "argocd-agent-addon"
	signerName   = "open-cluster-management.io/argocd-agent-addon"
	agentNS      = "argocd"
	reloaderImg  = "argocd-agent-addon:e2e"
	defaultImage = "quay.io/argoprojlabs/argocd-agent:v0.9.0"
	// agentCertValidity is the manager's --agent-cert-validity: the signer's minimum (1h).
	// Scenario 4 forces a renewal instead of waiting for one (see there why a shorter test
	// lifetime would not help with OCM v1.2.1).
	agentCertValidity = time.Hour
	// selectLabel is put on each ManagedCluster (value = its name) so that the Placement can
	// select clusters by name with a requiredClusterSelector.
	selectLabel = "e2e.argocd-agent-addon.io/cluster"
	// managerDepartureSettle is the manager's --departure-settle.
	managerDepartureSettle = 5 * time.Second
)

// env is the fleet and the manager every scenario shares; nil when the suite is skipped.
var env *suite

// skipWhy says why env is nil.
var skipWhy string

type suite struct {
	f          *fleet.Fleet
	hub        client.Client
	spokes     map[string]client.Client
	manager    *fleet.Process
	managerBin string
	tmp        string
	started    time.Time

	// Filled in by the scenarios for later ones.
	mu sync.Mutex
	// issued are the fingerprints of every client certificate seen on each cluster, in order.
	issued map[string][]string
}

func TestMain(m *testing.M) {
	// Scenario 4 re-executes this test binary as the stand-in agent process.
	if os.Getenv(standInEnv) != "" {
		os.Exit(runStandInAgent())
	}
	flag.Parse()
	// The API server warns that Argo CD's finalizer name has no path; the suite's clients would
	// print that through controller-runtime's unset logger as a stack trace.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	switch {
	case testing.Short():
		skipWhy = "starts a local OCM fleet (hub + managed clusters as processes); skipped with -short"
	case os.Getenv("FLEET_E2E") == "0":
		skipWhy = "FLEET_E2E=0: local OCM fleet tests disabled"
	case !selectedByRun():
		skipWhy = "no e2e test selected by -run"
	}
	if skipWhy != "" {
		return m.Run()
	}
	s, err := setUp()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: setting up: %v\n", err)
		return 1
	}
	env = s
	code := m.Run()
	if err := s.tearDown(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: tearing down: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// selectedByRun avoids starting a fleet for `go test -run SomethingElse` or `-list`.
func selectedByRun() bool {
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return false
	}
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	top, _, _ := strings.Cut(f.Value.String(), "/")
	re, err := regexp.Compile(top)
	return err != nil || slices.ContainsFunc([]string{"TestFleetE2E", "TestArgoCDApplication", "TestArgoCDApplicationSet", "TestArgoCDComponents", "TestArgoCDComponentsClusterLabel", "TestPullModelApplicationSet", "TestCMPDeliversAFolderWithoutArgoCD", "TestCMPPluginInHubArgoCD", "TestArgoCDClusterRegistrationForApplicationSets"}, re.MatchString)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// setUp builds the manager while the fleet starts (the project's CRDs go onto the hub with
// OCM's), then runs the manager against the hub.
func setUp() (*suite, error) {
	s := &suite{spokes: map[string]client.Client{}, issued: map[string][]string{}, started: time.Now()}
	var err error
	if s.tmp, err = os.MkdirTemp("", "argocd-agent-addon-e2e-"); err != nil {
		return nil, err
	}
	buildErr := make(chan error, 1)
	go func() {
		start := time.Now()
		bin, err := testenv.BuildManager(s.tmp)
		s.managerBin = bin
		if err == nil {
			logf("manager binary built in %s", time.Since(start).Round(100*time.Millisecond))
		}
		buildErr <- err
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f, err := fleet.Start(ctx, fleet.Options{
		Clusters:         []string{"cluster1", "cluster2"},
		BindingNamespace: ns,
		HubCRDPaths:      []string{filepath.Join(testenv.RepoRoot(), "manifests", "crds")},
		Logf:             logf,
	})
	bErr := <-buildErr
	if err != nil {
		_ = os.RemoveAll(s.tmp)
		return nil, errors.Join(err, bErr)
	}
	s.f = f
	if bErr != nil {
		_ = s.tearDown()
		return nil, bErr
	}
	if err := s.connect(); err != nil {
		_ = s.tearDown()
		return nil, err
	}
	// The hub admin's steps: the namespaces, then `helm install` of the chart, whose
	// ServiceAccount, RBAC, placement-generator ConfigMap and admission policy are created as
	// rendered (no Deployment: the manager runs as a fleet process, logs/argocd-agent-addon-manager.log,
	// authenticated as the chart's ServiceAccount, so it has exactly the chart's rights).
	// Metrics and probes are off: nothing scrapes them here and fixed ports could clash with
	// other processes on the machine.
	install, managerKubeconfig, err := s.installChart(ctx)
	if err != nil {
		_ = s.tearDown()
		return nil, err
	}
	s.manager, err = f.StartProcess(fleet.ProcessSpec{
		Name: "argocd-agent-addon-manager",
		Path: s.managerBin,
		Env:  testenv.ProjectProcessEnv(),
		Args: install.Args(
			"--kubeconfig="+managerKubeconfig,
			"--metrics-bind-address=0",
			"--health-probe-bind-address=0",
			// One process; a restarted manager must not wait out its predecessor's lease.
			"--leader-elect=false",
			"--reloader-image="+reloaderImg,
			"--agent-cert-validity="+agentCertValidity.String(),
			"--departure-settle="+managerDepartureSettle.String(),
			// Short, for the pull model's offline-deletion scenario.
			"--pull-model-offline-release-after=15s",
			"--zap-log-level=info",
		),
	})
	if err != nil {
		_ = s.tearDown()
		return nil, err
	}
	logf("manager started (pid %d); fleet ready %s after start; logs in %s",
		s.manager.Pid(), time.Since(s.started).Round(100*time.Millisecond), f.LogDir())
	return s, nil
}

// installChart creates the namespaces the chart's RBAC goes into and what `helm install` of the
// chart creates on the hub (but the Deployment and Services), and returns the install and a
// kubeconfig for the chart's ServiceAccount.
func (s *suite) installChart(ctx context.Context) (*testenv.ChartInstall, string, error) {
	if err := fleet.EnsureNamespaces(ctx, s.hub, ns, fleet.ArgoCDNamespace, tenantNS); err != nil {
		return nil, "", err
	}
	install, err := testenv.InstallChart(ctx, s.hub, ns, map[string]any{
		// The hub Argo CD's namespace too: ArgoCDClusterRegistrations write cluster secrets there.
		"managedNamespaces": []any{ns, fleet.ArgoCDNamespace},
		"pullModel":         map[string]any{"namespaces": []any{fleet.ArgoCDNamespace, tenantNS}},
		"applicationSet":    map[string]any{"placementGenerator": map[string]any{"enabled": true}},
	})
	if err != nil {
		return nil, "", err
	}
	user, groups := fleet.ServiceAccountUser(ns, install.ServiceAccount), fleet.ServiceAccountGroups(ns)
	path, _, err := s.f.HubUserKubeconfig("argocd-agent-addon-manager", user, groups...)
	return install, path, err
}

func (s *suite) connect() error {
	scheme := fleet.Scheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	var err error
	if s.hub, err = client.New(s.f.HubConfig(), client.Options{Scheme: scheme}); err != nil {
		return err
	}
	for _, c := range s.f.Clusters() {
		if s.spokes[c], err = client.New(s.f.SpokeConfig(c), client.Options{Scheme: scheme}); err != nil {
			return err
		}
	}
	return nil
}

func (s *suite) tearDown() error {
	var err error
	if s.f != nil {
		// Every component the scenarios started (OCM's, Argo CD's, the manager) ran with the
		// identity a real install gives it.
		masters, mErr := s.f.PrivilegedKubeconfigs()
		if mErr == nil && len(masters) > 0 {
			mErr = fmt.Errorf("fleet components authenticated in system:masters: %v", masters)
		}
		err = errors.Join(mErr, s.f.Stop())
	}
	_ = os.RemoveAll(s.tmp)
	return err
}

// scheme is the scheme of the suite's clients.
func (s *suite) scheme() *runtime.Scheme { return s.hub.Scheme() }

// managerLog is the manager's log file.
func (s *suite) managerLog() string { return s.manager.LogPath }

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
