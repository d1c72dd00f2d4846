package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/cmd"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// fleetRun is one run of one fleet size: its hub, meter and profiler, the manager once it
// runs, and what the phases measured.
type fleetRun struct {
	ctx      context.Context
	n        int
	clusters []string
	env      *testenv.Env
	meter    *benchkit.Meter
	prof     *profiler
	dir      string
	mgr      *exec.Cmd
	memory   func() benchkit.Memory // the manager's, once it runs
	shape    func(i int) *corev1.Secret
	// rawWriter is the raw phases' connection (rawWriterConfig).
	rawWriter *rest.Config
	// agents makes a client of one cluster's registration agent (agentClients).
	agents func(cluster string) (kubernetes.Interface, error)
	r      *result
}

// run measures one fleet size once; label names the run's profiles.
func run(n int, idle time.Duration, binary, label string) (*result, error) {
	b := &fleetRun{ctx: context.Background(), n: n, clusters: fakehub.Names("cluster-", n), r: &result{}}
	stop, err := b.startHub(label)
	defer stop()
	defer b.stopManager()
	if err != nil {
		return nil, err
	}
	steps := []struct {
		name string
		step func() error
	}{
		{"the raw writes", b.rawBaselines},
		{"starting the manager", func() error { return b.startManager(binary) }},
		{"the registration", b.register},
		{"the idle fleet", func() error { return b.idle(idle) }},
		{"one join", b.join},
		{"the renewal wave", b.wave},
		{"the deletion", b.deleteAndRawAgain},
	}
	for _, s := range steps {
		if err := s.step(); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	// The manager's last profile is in before the manager is stopped.
	b.prof.wait()
	return b.r, nil
}

// startHub starts the API server and etcd, the fleet's clusters, the meter and the profiler;
// stop stops what was started.
func (b *fleetRun) startHub(label string) (stop func(), err error) {
	var apiServerArgs map[string]string
	if !consistencyChecks {
		// Every 5 minutes (with jitter) the API server's watch cache reads each resource in
		// full from etcd to compare it with its own copy: at 10,000 clusters each such read of
		// the 90,000 addons or the Secrets costs seconds of CPU, and whether it falls into the
		// raw phase or the manager's decides the ratio more than either does.
		apiServerArgs = map[string]string{"feature-gates": "DetectCacheInconsistency=false"}
	}
	stops := []func(){}
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if b.env, err = testenv.Start(testenv.Options{APIServerArgs: apiServerArgs}); err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = b.env.Stop() })
	if b.dir, err = os.MkdirTemp("", "fleet-bench-"); err != nil {
		return stop, err
	}
	stops = append(stops, func() { _ = os.RemoveAll(b.dir) })
	if err := b.env.Client.Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return stop, err
	}
	logf("N=%d: creating managed clusters, namespaces and addons...", b.n)
	if err := fakehub.CreateClusters(b.ctx, b.env.Client, b.clusters, fakehub.Options{Addon: addonName, Realistic: true}); err != nil {
		return stop, err
	}
	if coresSplit {
		if err := splitCores(); err != nil {
			return stop, err
		}
		logf("N=%d: the API server and etcd on core 0, the benchmark and the manager on the others", b.n)
	}
	if b.meter, err = benchkit.NewMeter(b.env.Config); err != nil {
		return stop, err
	}
	if b.prof, err = newProfiler(b.env.Config, label); err != nil {
		return stop, err
	}
	if b.prof != nil {
		b.r.profiles = filepath.Join(profileDir, label)
	}
	stops = append(stops, b.prof.wait)
	return stop, nil
}

// rawBaselines measures the API server's raw pace for the registration's Secrets, by a plain
// writer and by one that keeps an informer on them, and for the wave's CSRs. Each phase's
// objects are deleted before the next, so that no phase pays for another's.
func (b *fleetRun) rawBaselines() error {
	shape, err := clusterSecretShape(b.clusters)
	if err != nil {
		return err
	}
	b.shape = shape
	if b.rawWriter, err = rawWriterConfig(b.ctx, b.env); err != nil {
		return err
	}
	if b.agents, err = agentClients(b.ctx, b.env); err != nil {
		return err
	}
	if b.r.rawCPU, err = b.rawWritesPhase("raw-writes", "raw-cluster-secrets", false); err != nil {
		return err
	}
	if b.r.rawInformedCPU, err = b.rawWritesPhase("raw-writes-informed", "raw-cluster-secrets-informed", true); err != nil {
		return err
	}
	b.r.rawCSR, err = b.rawCSRPaces("")
	return err
}

// startManager creates the fleet's Placement and decisions, starts the manager as the chart
// runs it and waits until its controllers' informers have synced.
func (b *fleetRun) startManager(binary string) error {
	c := b.env.Client
	if err := c.Create(b.ctx, &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "all"}}); err != nil {
		return err
	}
	if err := fakehub.SetDecisions(b.ctx, c, namespace, "all", b.clusters); err != nil {
		return err
	}
	healthAddr, err := freeLoopbackAddress()
	if err != nil {
		return err
	}
	args, err := managerCommand(b.ctx, b.env, b.dir, healthAddr)
	if err != nil {
		return err
	}
	if b.prof != nil {
		if b.prof.managerAddr, err = freeLoopbackAddress(); err != nil {
			return err
		}
		args = append(args, "--pprof-bind-address="+b.prof.managerAddr)
	}
	if b.mgr, err = startManagerProcess(binary, args, filepath.Join(b.dir, "manager.log")); err != nil {
		return err
	}
	b.meter.Pids[benchkit.Manager] = []int{b.mgr.Process.Pid}
	b.memory = benchkit.WatchMemory(b.mgr.Process.Pid)
	// The clock starts once the manager is ready (the informers of its controllers synced), as
	// on a hub where it has been running: filling the caches of a large hub is not the
	// registration's work.
	started := time.Now()
	if err := waitReady(b.ctx, healthAddr, b.mgr.Process.Pid, 10*time.Minute); err != nil {
		return err
	}
	b.r.synced = time.Since(started)
	logf("N=%d: manager ready (its controllers' informers synced) %s after its start", b.n, b.r.synced.Round(10*time.Millisecond))
	return nil
}

// startManagerProcess starts the manager with its output in logPath, as in a container with
// --memory-limit when it is set.
func startManagerProcess(binary string, args []string, logPath string) (*exec.Cmd, error) {
	mgr := exec.Command(binary, args...)
	if memoryLimit != "" {
		// What the binary sets itself in a container with this memory limit.
		q, err := resource.ParseQuantity(memoryLimit)
		if err != nil {
			return nil, fmt.Errorf("--memory-limit: %w", err)
		}
		mgr.Env = append(os.Environ(), fmt.Sprintf("GOMEMLIMIT=%d", cmd.SoftMemoryLimit(q.Value())))
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	mgr.Stdout, mgr.Stderr = logFile, logFile
	return mgr, mgr.Start()
}

// stopManager stops the manager and reports its errors.
func (b *fleetRun) stopManager() {
	if b.mgr == nil {
		return
	}
	_ = b.mgr.Process.Kill()
	_, _ = b.mgr.Process.Wait()
	reportManagerErrors(filepath.Join(b.dir, "manager.log"))
	b.mgr = nil
}

// register applies the GitOpsCluster and times it to Ready with every agent available.
func (b *fleetRun) register() error {
	// The counters start once the profiles of the phase before have ended: the manager's
	// requests in that wait are not the registration's.
	b.prof.phase("registration")
	before, err := b.read()
	if err != nil {
		return err
	}
	start := time.Now()
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: gitOpsClusterName},
		Spec: v1alpha1.GitOpsClusterSpec{
			PlacementRef:     v1alpha1.PlacementReference{Kind: v1alpha1.PlacementKind, Name: "all"},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{Mode: v1alpha1.AgentModeManaged, PrincipalServerAddress: "principal.example.com"},
		}}
	if err := b.env.Client.Create(b.ctx, goc); err != nil {
		return err
	}
	if err := b.waitForReady(start.Add(20 * time.Minute)); err != nil {
		return err
	}
	ready := time.Since(start)
	atReady, err := b.read()
	if err != nil {
		return err
	}
	b.r.ready = ready
	b.r.registration = atReady.share(before, benchkit.Manager, ready)
	c := b.r.registration.cost
	logf("N=%d: Ready after %s; until then watch events sent %v, manager CPU %s, API server and etcd CPU %s", b.n, ready,
		c.Events, c.CPU[benchkit.Manager], c.Servers())
	return b.settle(before, start)
}

// waitForReady polls the GitOpsCluster until it is Ready with every agent available.
func (b *fleetRun) waitForReady(deadline time.Time) error {
	for {
		g := &v1alpha1.GitOpsCluster{}
		if err := b.env.Client.Get(b.ctx, types.NamespacedName{Namespace: namespace, Name: gitOpsClusterName}, g); err != nil {
			return err
		}
		if meta.IsStatusConditionTrue(g.Status.Conditions, v1alpha1.ConditionReady) && int(g.Status.AvailableAgents) == b.n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not Ready after 20 minutes: %+v", g.Status.Conditions)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
