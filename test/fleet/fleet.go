package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// Options configure Start. Zero values get the defaults noted on each field.
type Options struct {
	// Clusters are the managed clusters' names. Default: cluster1, cluster2.
	Clusters []string
	// Dir is the run directory (logs, kubeconfigs, certificates, etcd data).
	// Default: bin/fleet/<time>-<pid>[-<n>] under the repository root (n counts the process's fleets).
	Dir string
	// BindingNamespace gets a ManagedClusterSetBinding for ClusterSet (created if missing).
	// Default: open-cluster-management.
	BindingNamespace string
	// ClusterSet is the ManagedClusterSet every cluster joins (label
	// cluster.open-cluster-management.io/clusterset). Default: fleet.
	ClusterSet string
	// HubCRDPaths and SpokeCRDPaths are extra CRD files or folders to install, e.g. the
	// project's manifests/crds on the hub.
	HubCRDPaths   []string
	SpokeCRDPaths []string
	// K8sBinDir holds etcd, kube-apiserver, kube-controller-manager. Default: hack/test-binaries.sh.
	K8sBinDir string
	// OCMBinDir holds the OCM binaries. Default: hack/ocm-binaries.sh.
	OCMBinDir string
	// APIServerArgs are extra kube-apiserver flags ("--name=value") for every cluster.
	APIServerArgs []string
	// HubEtcdArgs are extra etcd flags ("--name=value") for the hub's etcd, e.g. a larger
	// --quota-backend-bytes than etcd's default of 2 GiB.
	HubEtcdArgs []string
	// HubControllerArgs are extra flags ("--name=value") for OCM's hub controllers, by name:
	// registration-controller, placement-controller, addon-manager. A benchmark may raise a
	// controller's --kube-api-qps, which OCM's ClusterManager leaves at 50.
	HubControllerArgs map[string][]string
	// StartTimeout bounds each wait while starting. Default: 3 minutes.
	StartTimeout time.Duration
	// Logf receives progress lines (e.g. t.Logf). Default: none.
	Logf func(format string, args ...any)
	// KeepData keeps the etcd data after Stop; logs, kubeconfigs and certificates are always kept.
	KeepData bool
	// OnProcess, if set, is called for every process the fleet starts, possibly from several
	// goroutines at once.
	OnProcess func(*Process)
	// RealNodes gives every cluster, hub included, a real node (package test/node): a kubelet,
	// kube-proxy and containerd in a network namespace of their own, a kube-scheduler, the
	// controller manager's workload controllers and a cluster DNS, so that Deployments run as
	// pods. It needs root and hack/node-packages.sh's packages (see nodes.go).
	RealNodes bool
	// NodeBinDir holds kubelet, kube-proxy and kube-scheduler. Default: hack/node-binaries.sh.
	NodeBinDir string
}

// Fleet is a running hub and its managed clusters, all local processes.
type Fleet struct {
	opts      Options
	dir       string
	k8sBin    string
	ocmBin    string
	scheme    *kruntime.Scheme
	hub       *controlPlane
	hubClient client.Client
	spokes    map[string]*controlPlane

	// begun is every control plane whose start began, up or not: Stop stops the nodes of
	// those that failed half-way too.
	begunMu sync.Mutex
	begun   []*controlPlane

	mu       sync.Mutex
	procs    []*Process
	onStop   []func() error
	stopOnce sync.Once
	stopErr  error

	// UpTime is how long Start took once the binaries were there.
	UpTime time.Duration

	// With RealNodes: the images every node has, and the registry that serves them.
	images imageStore
}

var (
	binOnce                sync.Once
	k8sBinDir, ocmBinDir   string
	binErr                 error
	k8sBinTime, ocmBinTime time.Duration
)

// Binaries returns the folders of the Kubernetes and OCM binaries, building them on first use
// (hack/test-binaries.sh honours KUBEBUILDER_ASSETS, hack/ocm-binaries.sh OCM_BINARIES_DIR), and
// how long each script took (minutes on a cold cache, milliseconds after).
func Binaries() (k8s, ocm string, k8sTime, ocmTime time.Duration, err error) {
	binOnce.Do(func() {
		start := time.Now()
		k8sBinDir, binErr = testenv.BinaryAssets()
		k8sBinTime = time.Since(start)
		if binErr != nil {
			return
		}
		start = time.Now()
		ocmBinDir, binErr = runScript("ocm-binaries.sh")
		ocmBinTime = time.Since(start)
	})
	return k8sBinDir, ocmBinDir, k8sBinTime, ocmBinTime, binErr
}

func runScript(name string) (string, error) {
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", name))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/%s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (o *Options) defaults() {
	if len(o.Clusters) == 0 {
		o.Clusters = []string{"cluster1", "cluster2"}
	}
	if o.BindingNamespace == "" {
		o.BindingNamespace = "open-cluster-management"
	}
	if o.ClusterSet == "" {
		o.ClusterSet = "fleet"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if o.Dir == "" {
		runs := filepath.Join(testenv.RepoRoot(), "bin", "fleet")
		pruneRuns(runs, keepRuns)
		o.Dir = filepath.Join(runs, fmt.Sprintf("%s-%d", time.Now().Format("20060102-150405"), os.Getpid()))
		// A second fleet of the same process in the same second gets a directory of its own.
		if n := runsStarted.Add(1); n > 1 {
			o.Dir += fmt.Sprintf("-%d", n)
		}
	}
}

// runsStarted counts the fleets this process started with a default run directory.
var runsStarted atomic.Int64

// keepRuns is how many earlier default run directories (logs, kubeconfigs) stay in bin/fleet.
const keepRuns = 10

// pruneRuns removes all but the newest keep run directories (named <yyyymmdd-hhmmss>-<pid>).
func pruneRuns(dir string, keep int) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var runs []string
	for _, e := range entries {
		if e.IsDir() && len(e.Name()) > 16 && e.Name()[8] == '-' && e.Name()[15] == '-' {
			runs = append(runs, e.Name())
		}
	}
	sort.Strings(runs)
	for len(runs) > keep {
		_ = os.RemoveAll(filepath.Join(dir, runs[0]))
		runs = runs[1:]
	}
	// A run whose test binary was killed never reached Stop: drop its etcd data (hundreds of
	// MB) once none of its processes is alive.
	for _, r := range runs {
		run := filepath.Join(dir, r)
		if recentlyTouched(run) || runAlive(run) {
			continue
		}
		etcds, _ := filepath.Glob(filepath.Join(run, "*", "etcd"))
		for _, e := range etcds {
			_ = os.RemoveAll(e)
		}
		_ = os.RemoveAll(filepath.Join(run, "tmp"))
	}
}

// recentlyTouched: a fleet that is still starting may not have listed its processes yet.
func recentlyTouched(run string) bool {
	for _, p := range []string{filepath.Join(run, "pids"), run} {
		if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) < 10*time.Minute {
			return true
		}
	}
	return false
}

// runAlive reports whether a process listed in run/pids still runs with the run directory on
// its command line (so a reused pid does not count).
func runAlive(run string) bool {
	data, err := os.ReadFile(filepath.Join(run, "pids"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		pid, _, _ := strings.Cut(line, " ")
		if pid == "" {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err == nil && strings.Contains(string(cmdline), run) {
			return true
		}
	}
	return false
}

// Start brings up a hub and the managed clusters and returns when every cluster is joined,
// available and in the cluster set, and the set is bound to the binding namespace. On error
// everything started so far is stopped again.
func Start(ctx context.Context, opts Options) (*Fleet, error) {
	opts.defaults()
	seen := map[string]bool{"hub": true}
	for _, c := range opts.Clusters {
		if seen[c] {
			return nil, fmt.Errorf("cluster name %q used twice (or is \"hub\")", c)
		}
		seen[c] = true
	}
	if err := checkHubControllerArgs(opts.HubControllerArgs); err != nil {
		return nil, err
	}
	f := &Fleet{opts: opts, spokes: map[string]*controlPlane{}, scheme: Scheme()}
	var err error
	if f.dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(f.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	if opts.K8sBinDir == "" || opts.OCMBinDir == "" {
		k8s, ocm, _, _, err := Binaries()
		if err != nil {
			return nil, err
		}
		if opts.K8sBinDir == "" {
			opts.K8sBinDir = k8s
		}
		if opts.OCMBinDir == "" {
			opts.OCMBinDir = ocm
		}
	}
	f.k8sBin, f.ocmBin = opts.K8sBinDir, opts.OCMBinDir
	if opts.RealNodes {
		if err := node.Available(); err != nil {
			return nil, fmt.Errorf("real nodes: %w", err)
		}
		if opts.NodeBinDir == "" {
			if opts.NodeBinDir, err = NodeBinaries(); err != nil {
				return nil, err
			}
		}
	}
	f.opts = opts
	f.logf("fleet: run directory %s (logs in %s)", f.dir, f.LogDir())

	start := time.Now()
	if err := f.up(ctx); err != nil {
		if stopErr := f.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, fmt.Errorf("starting the fleet (logs in %s): %w", f.LogDir(), err)
	}
	f.UpTime = time.Since(start)
	f.logf("fleet: up in %s", f.UpTime.Round(100*time.Millisecond))
	return f, nil
}

func (f *Fleet) up(ctx context.Context) error {
	// Every control plane starts at once (most of their start-up is waiting); each managed
	// cluster joins as soon as both it and the hub's OCM controllers are up.
	var wg sync.WaitGroup
	hubReady := make(chan struct{})
	var hubErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(hubReady)
		hubErr = f.startHub(ctx)
	}()
	spokeErrs := make([]error, len(f.opts.Clusters))
	var smu sync.Mutex
	for i, n := range f.opts.Clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cp, err := f.startControlPlane(ctx, n)
			if err != nil {
				spokeErrs[i] = err
				return
			}
			smu.Lock()
			f.spokes[n] = cp
			smu.Unlock()
			<-hubReady
			if hubErr != nil {
				return
			}
			spokeErrs[i] = f.joinSpoke(ctx, cp)
		}()
	}
	wg.Wait()
	if err := errors.Join(append([]error{hubErr}, spokeErrs...)...); err != nil {
		return err
	}
	for _, cp := range append(f.spokeList(), f.hub) {
		if err := f.waitKCM(ctx, cp); err != nil {
			return err
		}
	}
	if err := f.waitNodes(ctx); err != nil {
		return err
	}
	return f.acceptAndBind(ctx)
}

func (f *Fleet) startHub(ctx context.Context) error {
	hub, err := f.startControlPlane(ctx, "hub")
	if err != nil {
		return err
	}
	f.hub = hub
	if f.hubClient, err = f.hub.adminClient(f.scheme); err != nil {
		return err
	}
	return f.setupHub(ctx)
}

// Stop ends every process the fleet started (SIGTERM to each process group, SIGKILL after 15 s),
// controllers and agents first, then API servers, then etcd. Safe to call more than once.
func (f *Fleet) Stop() error {
	f.stopOnce.Do(func() {
		// The nodes' processes first (the kubelet's pods are deleted with their containers, not
		// through the API), then the fleet's, then the nodes' networks: an API server serves on
		// the host end of its node's veth, and its shutdown waits for its clients' watches and
		// for its requests to itself there.
		f.stopErr = errors.Join(f.stopNodes((*node.Node).StopProcesses), f.stopAll(), f.stopNodes((*node.Node).Stop))
		// In-process servers (Redis, Git) go after the processes that use them.
		f.mu.Lock()
		hooks := f.onStop
		f.mu.Unlock()
		for i := len(hooks) - 1; i >= 0; i-- {
			f.stopErr = errors.Join(f.stopErr, hooks[i]())
		}
		if !f.opts.KeepData {
			for _, cp := range append(f.spokeList(), f.hub) {
				if cp != nil {
					_ = os.RemoveAll(filepath.Join(cp.dir, "etcd"))
				}
			}
		}
		_ = os.RemoveAll(filepath.Join(f.dir, "tmp"))
		f.logf("fleet: stopped; logs kept in %s", f.LogDir())
	})
	return f.stopErr
}

// OnStop registers fn to run when the fleet stops, after its processes have ended; hooks run
// in reverse order of registration.
func (f *Fleet) OnStop(fn func() error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onStop = append(f.onStop, fn)
}

// plane returns the control plane of "hub" or of a managed cluster.
func (f *Fleet) plane(name string) (*controlPlane, error) {
	if name == "hub" {
		return f.hub, nil
	}
	if cp := f.spokes[name]; cp != nil {
		return cp, nil
	}
	return nil, fmt.Errorf("no cluster %q (neither \"hub\" nor a managed cluster)", name)
}

// Processes lists every process the fleet started, running or not.
func (f *Fleet) Processes() []*Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*Process(nil), f.procs...)
}

// Err reports the first fleet process that exited without being asked to.
func (f *Fleet) Err() error { return f.checkProcesses() }

// Dir is the run directory; LogDir holds one <process>.log per process.
func (f *Fleet) Dir() string    { return f.dir }
func (f *Fleet) LogDir() string { return filepath.Join(f.dir, "logs") }

// Clusters are the managed clusters' names, ClusterSet their ManagedClusterSet, and
// BindingNamespace the namespace the set is bound to.
func (f *Fleet) Clusters() []string       { return append([]string(nil), f.opts.Clusters...) }
func (f *Fleet) ClusterSet() string       { return f.opts.ClusterSet }
func (f *Fleet) BindingNamespace() string { return f.opts.BindingNamespace }

// HubConfig is a cluster-admin rest.Config for the hub; HubKubeconfigPath the same as a file.
func (f *Fleet) HubConfig() *rest.Config   { return rest.CopyConfig(f.hub.adminConfig) }
func (f *Fleet) HubKubeconfigPath() string { return f.hub.adminKubeconfig }
func (f *Fleet) HubClient() client.Client  { return f.hubClient }
func (f *Fleet) HubURL() string            { return f.hub.url }

// HubEtcdURL is the hub etcd's client URL (plain HTTP on loopback), e.g. for its /metrics.
func (f *Fleet) HubEtcdURL() string         { return f.hub.etcdURL }
func (f *Fleet) HubCAPath() string          { return f.hub.ca.certPath }
func (f *Fleet) HubCAKeyPath() string       { return f.hub.ca.keyPath }
func (f *Fleet) spokeList() []*controlPlane { return sortedPlanes(f.spokes) }

// SpokeConfig is a cluster-admin rest.Config for a managed cluster's own API server (nil for
// an unknown name); SpokeKubeconfigPath the same as a file.
func (f *Fleet) SpokeConfig(name string) *rest.Config {
	cp := f.spokes[name]
	if cp == nil {
		return nil
	}
	return rest.CopyConfig(cp.adminConfig)
}

func (f *Fleet) SpokeKubeconfigPath(name string) string {
	if cp := f.spokes[name]; cp != nil {
		return cp.adminKubeconfig
	}
	return ""
}

// SpokeClient is a cluster-admin client for a managed cluster's API server.
func (f *Fleet) SpokeClient(name string) (client.Client, error) {
	cp, ok := f.spokes[name]
	if !ok {
		return nil, fmt.Errorf("no managed cluster %q", name)
	}
	return cp.adminClient(f.scheme)
}

// HubUserKubeconfig writes a kubeconfig for another hub identity (client certificate signed by
// the hub CA) to <Dir>/hub/<file>.kubeconfig, e.g. to run the project's manager with the
// permissions its chart grants rather than as cluster-admin.
func (f *Fleet) HubUserKubeconfig(file, user string, groups ...string) (string, *rest.Config, error) {
	return f.hub.userKubeconfig(file, user, groups)
}

func (f *Fleet) logf(format string, args ...any) {
	if f.opts.Logf != nil {
		f.opts.Logf(format, args...)
	}
}

func sortedPlanes(m map[string]*controlPlane) []*controlPlane {
	var names []string
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*controlPlane
	for _, n := range names {
		out = append(out, m[n])
	}
	return out
}

// StartForTest starts a fleet for a test and stops it in t.Cleanup (also when the test fails).
// It skips the test with -short or when FLEET_E2E=0. opts.Logf defaults to t.Logf.
func StartForTest(t testing.TB, opts Options) *Fleet {
	t.Helper()
	SkipIfDisabled(t)
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Errorf("stopping the fleet: %v", err)
		}
	})
	return f
}

// SkipIfDisabled skips tests that need a local fleet under -short or FLEET_E2E=0.
func SkipIfDisabled(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a local OCM fleet (hub + managed clusters as processes); skipped with -short")
	}
	if os.Getenv("FLEET_E2E") == "0" {
		t.Skip("FLEET_E2E=0: local OCM fleet tests disabled")
	}
}
