// Package pulltest is the harness of the pull model's envtest tests: a real API server with
// Argo CD's CRDs, the tenancy a hub admin sets up, a simulated OCM work agent and the manager
// built like the binary's. The propagation, status and report packages each run their tests
// against one Suite; setup's tests start their own API servers (without Argo CD, or restarted
// under the manager) with StartManager. Only tests import it: it starts processes and fails
// tests.
package pulltest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const (
	// ArgoNS is the hub Argo CD namespace of the tests' Applications.
	ArgoNS = "argocd"
	// TenantNS is a tenant's hub namespace the operator allowed for the pull model.
	TenantNS = "tenant-a"
	// AgentSourceNS is a managed cluster's name, allowed by mistake as a source: the manager must
	// still refuse it.
	AgentSourceNS = "pm-agent1"
	// OfflineRelease is the tests' --pull-model-offline-release-after: short, so that the
	// offline release is seen within a test.
	OfflineRelease = 3 * time.Second
)

// Suite is one package's API server with Argo CD's CRDs and the tenancy fixtures, a work agent
// and the manager running against it. TestMain leaves it nil under -short, so that the package's
// unit tests still run: its methods that take a testing.TB then skip the test.
type Suite struct {
	*testenv.Env
	// Agent plays the clusters' work agents for the AppProjects the pull model delivers.
	Agent *WorkAgent
	stop  func()
}

// Main is a package's TestMain: it starts a Suite into *s, runs the tests and stops it. With
// -short it starts nothing and runs the tests, leaving *s nil.
func Main(m *testing.M, s **Suite) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	started, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*s = started
	code := m.Run()
	started.Stop()
	os.Exit(code)
}

// Start starts the API server, makes the hub Argo CD namespace and the tenancy steps, and
// starts the work agent and the manager, in that order: the manager's first pass sees a hub
// that is ready.
func Start() (*Suite, error) {
	CaptureLogs()
	env, err := testenv.Start(testenv.Options{WithArgoCD: true})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ArgoNS}}); err != nil {
		_ = env.Stop()
		return nil, err
	}
	if err := TenancySteps(ctx, env.Client); err != nil {
		_ = env.Stop()
		return nil, err
	}
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agent := StartWorkAgent(agentCtx, env.Client)
	stopManager := StartManager(env, nil)
	return &Suite{Env: env, Agent: agent, stop: func() {
		stopManager()
		stopAgent()
		_ = env.Stop()
	}}, nil
}

// Stop stops the manager, the work agent and the API server.
func (s *Suite) Stop() { s.stop() }

// need skips the test when there is no Suite (-short).
func (s *Suite) need(t testing.TB) {
	t.Helper()
	if s == nil {
		t.Skip("needs a kube-apiserver; skipped with -short")
	}
}

// StartManager starts a manager built like the binary's (its cache, client and controller
// options, and Setup) against e, with the tests' pull-model policy and edit applied to the
// options, and returns its stop.
func StartManager(e *testenv.Env, edit func(*manager.Options)) func() {
	opts := manager.DefaultOptions()
	opts.Fleet.ReloaderImage = "argocd-agent-addon:test"
	// The operator's allowed pull-model namespaces: the hub Argo CD namespace, a tenant's, and
	// a managed cluster's (which must still be refused).
	opts.PullModel.Policy.SourceNamespaces = []string{ArgoNS, TenantNS, AgentSourceNS}
	opts.PullModel.OfflineRelease = OfflineRelease
	if edit != nil {
		edit(&opts)
	}
	stop, err := testenv.StartManager(e.Config, e.Client.Scheme(), opts)
	if err != nil {
		panic(err)
	}
	return stop
}

// CaptureLogs sends controller-runtime's log, and so every manager's in the process, to the
// buffer it returns: tests check what the manager says, and go test's output stays short.
func CaptureLogs() *LogBuffer {
	b := &LogBuffer{}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(b)))
	return b
}

// LogBuffer collects log lines; with TEST_VERBOSE set it copies them to stderr as well.
type LogBuffer struct {
	mu   sync.Mutex
	data strings.Builder
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if os.Getenv("TEST_VERBOSE") != "" {
		_, _ = os.Stderr.Write(p)
	}
	return b.data.Write(p)
}

// String returns what was logged so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.data.String()
}
