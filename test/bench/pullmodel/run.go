package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// pullRun is one run of the benchmark: its hub, its clients, the manager and the simulated
// spokes, and the meter that accounts for each phase.
type pullRun struct {
	ctx              context.Context
	env              *testenv.Env
	c                client.Client
	meter            *benchkit.Meter
	nClusters, nApps int
	sets             []*unstructured.Unstructured
	agent            *workAgent
	spokes           []*spokeApp
	mgr              *exec.Cmd
	memory           func() benchkit.Memory
	out              *benchkit.Output
}

func run(nClusters, nApps, nSets int, idle, refresh time.Duration, binary string, out *benchkit.Output) error {
	p := &pullRun{ctx: context.Background(), nClusters: nClusters, nApps: nApps, out: out}
	env, err := testenv.Start(testenv.Options{WithArgoCD: true})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	p.env = env
	env.Config.QPS, env.Config.Burst = 2000, 4000
	if p.c, err = client.New(env.Config, client.Options{Scheme: env.Client.Scheme()}); err != nil {
		return err
	}
	if p.meter, err = benchkit.NewMeter(env.Config); err != nil {
		return err
	}
	if err := p.setup(nSets); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pullmodel-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := p.startManager(dir, binary); err != nil {
		return err
	}
	defer func() { _ = p.mgr.Process.Kill(); _, _ = p.mgr.Process.Wait() }()
	for _, phase := range []func() error{p.propagate, p.feedBack, p.syncAll, func() error { return p.refreshes(idle, refresh) }} {
		if err := phase(); err != nil {
			return err
		}
	}
	return nil
}

// setup registers the clusters, a hub admin's objects, the ApplicationSets and the
// Applications.
func (p *pullRun) setup(nSets int) error {
	ctx, c := p.ctx, p.c
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argoNS}}); err != nil {
		return err
	}
	start := time.Now()
	if err := parallel(p.nClusters, func(i int) error {
		name := fmt.Sprintf("cluster-%04d", i)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return err
		}
		return c.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{clusterv1beta2.ClusterSetLabel: benchSet}}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}})
	}); err != nil {
		return err
	}
	// A hub admin's steps: the clusters' set bound to the hub Argo CD namespace, and the default
	// AppProject (argocd-server makes it on a real hub).
	project := pullmodel.NewApplication()
	project.SetKind("AppProject")
	project.SetNamespace(argoNS)
	project.SetName("default")
	project.Object["spec"] = map[string]any{"sourceRepos": []any{"*"}, "destinations": []any{map[string]any{"server": "*", "namespace": "*"}}}
	for _, o := range []client.Object{
		&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: benchSet}},
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: benchSet}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: benchSet}},
		project,
	} {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	if err := p.createApplications(nSets); err != nil {
		return err
	}
	p.out.Printf("setup: %d clusters, %d ApplicationSets and %d Applications created in %s\n", p.nClusters, nSets, p.nApps, time.Since(start).Round(10*time.Millisecond))
	return nil
}

// createApplications creates the ApplicationSets and the Applications they own, as a
// clusterDecisionResource generator's are owned: their Applications are the ones whose
// ManifestWorks read the spoke's reconcile time after a sync.
func (p *pullRun) createApplications(nSets int) error {
	p.sets = make([]*unstructured.Unstructured, nSets)
	for k := range p.sets {
		set := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"generators": []any{map[string]any{"list": map[string]any{"elements": []any{}}}},
			"template":   map[string]any{"metadata": map[string]any{"name": "{{name}}"}, "spec": map[string]any{"project": "default", "destination": map[string]any{"server": pullmodel.InClusterServer}}},
		}}}
		set.SetGroupVersionKind(pullmodel.ApplicationSetGVK)
		set.SetNamespace(argoNS)
		set.SetName(fmt.Sprintf("set-%03d", k))
		if err := p.c.Create(p.ctx, set); err != nil {
			return err
		}
		p.sets[k] = set
	}
	return parallel(p.nApps, func(i int) error { return p.c.Create(p.ctx, application(i, p.nClusters, p.sets[i%nSets])) })
}

func (p *pullRun) startManager(dir, binary string) error {
	kubeconfig, err := p.env.KubeconfigFile(dir)
	if err != nil {
		return err
	}
	args := append([]string{"manager", "--kubeconfig=" + kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--managed-namespaces=bench", "--zap-log-level=error"}, *managerArgs...)
	p.mgr = exec.Command(binary, args...)
	logf, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return err
	}
	p.mgr.Stdout, p.mgr.Stderr = logf, logf
	if err := p.mgr.Start(); err != nil {
		return err
	}
	p.meter.Pids[benchkit.Manager] = []int{p.mgr.Process.Pid}
	p.memory = benchkit.WatchMemory(p.mgr.Process.Pid)
	return nil
}

// phase measures one phase: what it took and cost until 2 s after it ended (the manager's
// last writes of it in).
func (p *pullRun) phase(do func() error) (benchkit.Cost, error) {
	before, err := p.meter.Read(p.ctx)
	if err != nil {
		return benchkit.Cost{}, err
	}
	if err := do(); err != nil {
		return benchkit.Cost{}, err
	}
	took := time.Since(before.At)
	time.Sleep(2 * time.Second)
	after, err := p.meter.Read(p.ctx)
	if err != nil {
		return benchkit.Cost{}, err
	}
	c := after.Since(before)
	c.Took = took
	return c, nil
}

// perApp is a count per Application.
func (p *pullRun) perApp(n int) float64 { return benchkit.PerEach(n, p.nApps) }

// propagate times the manager from its start until every Application is delivered as a
// ManifestWork.
func (p *pullRun) propagate() error {
	c, err := p.phase(func() error {
		return waitFor("every Application delivered", phaseTimeout, func() (bool, error) {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: workv1.GroupName, Version: "v1", Kind: "ManifestWorkList"})
			if err := p.c.List(p.ctx, list, client.HasLabels{pullmodel.LabelPull}); err != nil {
				return false, err
			}
			return len(list.Items) == p.nApps, nil
		})
	})
	if err != nil {
		return err
	}
	w := c.Writes()
	p.out.Printf("propagation: %d ManifestWorks in %s after the manager started; writes %s = %.2f per Application; manager CPU %s per Application\n",
		p.nApps, c.Took.Round(10*time.Millisecond), benchkit.Sorted(w), p.perApp(benchkit.Total(w)), benchkit.Ms(benchkit.PerUnit(c.CPU[benchkit.Manager], p.nApps)))
	return nil
}
