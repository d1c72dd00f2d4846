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
)

// Images in the fleet's registry, known once it runs (setUp).
var (
	// reloaderImg is the project's image: the manager's and the cert-reloader's (the chart's
	// --reloader-image).
	reloaderImg string
	// agentImage is the stand-in for argocd-agent's image (test/node/images/argocd-agent), which
	// the scenarios' GitOpsClusters name with spec.argoCDAgentAddon.image; agentImage2 is a
	// second tag of it.
	agentImage, agentImage2 string
	// guestbookImg1 and guestbookImg2 are two tags of the hello test image the guestbook runs.
	guestbookImg1, guestbookImg2 string
)

// env is the fleet and the manager every scenario shares; nil when the suite is skipped.
var env *suite

// skipWhy says why env is nil.
var skipWhy string

type suite struct {
	f      *fleet.Fleet
	hub    client.Client
	spokes map[string]client.Client
	// managerBin is the project's binary built for this machine, for the commands a person
	// runs (status, cmp generate); the manager itself runs as the chart's pod.
	managerBin string
	tmp        string
	started    time.Time

	// Filled in by the scenarios for later ones.
	mu sync.Mutex
	// issued are the fingerprints of every client certificate seen on each cluster, in order.
	issued map[string][]string
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
		skipWhy = "starts a local OCM fleet on real nodes; skipped with -short"
	case os.Getenv("FLEET_E2E") == "0":
		skipWhy = "FLEET_E2E=0: local OCM fleet tests disabled"
	case !requested:
		skipWhy = node.SkipReason
	case !selectedByRun():
		skipWhy = "no e2e test selected by -run"
	}
	if skipWhy != "" {
		return m.Run()
	}
	if nodesErr != nil {
		// Asked for and impossible: a skip would report a pass that tested nothing.
		fmt.Fprintf(os.Stderr, "e2e: %s=1 but real nodes cannot run here: %v\n", node.RequestedEnv, nodesErr)
		return 1
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
	return err != nil || slices.ContainsFunc([]string{"TestFleetE2E", "TestArgoCDApplication", "TestArgoCDApplicationSet", "TestArgoCDComponents", "TestArgoCDComponentsClusterLabel", "TestPullModelApplicationSet", "TestCMPDeliversAFolderWithoutArgoCD", "TestCMPPluginInHubArgoCD", "TestArgoCDClusterRegistrationForApplicationSets", "TestManagerPodSpec", "TestForeignArgoCDIsLeftAlone", "TestPullModelSurvivesAnOutage"}, re.MatchString)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// setUp builds the images while the fleet starts on real nodes (the project's CRDs go onto
// the hub with OCM's), then installs the chart with Helm's SDK, as a hub admin does: the
// manager runs as the chart's pod.
func setUp() (*suite, error) {
	s := &suite{spokes: map[string]client.Client{}, issued: map[string][]string{}, started: time.Now()}
	var err error
	if s.tmp, err = os.MkdirTemp("", "argocd-agent-addon-e2e-"); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
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
	images := nodeapps.StartBuild(ctx, s.tmp, imageTag, logf)

	f, err := fleet.Start(ctx, fleet.Options{
		Clusters:         []string{"cluster1", "cluster2"},
		BindingNamespace: ns,
		HubCRDPaths:      []string{filepath.Join(testenv.RepoRoot(), "manifests", "crds")},
		Logf:             logf,
		RealNodes:        true,
	})
	bErr := <-buildErr
	imgs, iErrs := images.Wait()
	if err != nil {
		_ = os.RemoveAll(s.tmp)
		return nil, errors.Join(append([]error{err, bErr}, iErrs...)...)
	}
	s.f = f
	if err := errors.Join(append([]error{bErr}, iErrs...)...); err != nil {
		_ = s.tearDown()
		return nil, err
	}
	if err := nodeapps.AddToFleet(ctx, f, imgs, s.tmp); err != nil {
		_ = s.tearDown()
		return nil, err
	}
	reg := f.RegistryHost()
	reloaderImg = nodeapps.ManagerRepository(reg) + ":" + imageTag
	agentImage, agentImage2 = nodeapps.StandInAgentRef(reg, ""), nodeapps.StandInAgentRef(reg, nodeapps.StandInAgentSecondTag)
	guestbookImg1, guestbookImg2 = nodeapps.HelloRef(reg, 1), nodeapps.HelloRef(reg, 2)
	if err := s.connect(); err != nil {
		_ = s.tearDown()
		return nil, err
	}
	if err := s.installChart(ctx); err != nil {
		_ = s.tearDown()
		return nil, err
	}
	logf("manager's pod Ready; fleet ready %s after start; logs in %s", time.Since(s.started).Round(100*time.Millisecond), f.LogDir())
	return s, nil
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
		values, 5*time.Minute, logf)
	if err != nil {
		return fmt.Errorf("helm install: %w\n%s", err, nodeapps.PodReport(ctx, s.f, "hub", ns))
	}
	logf("helm install %s (revision %d): the manager's pod is Ready after %s", rel.Name, rel.Version, time.Since(start).Round(100*time.Millisecond))
	return nil
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
	_ = os.RemoveAll(s.tmp)
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
