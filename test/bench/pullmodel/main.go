// Command pullmodel benchmarks the basic pull model on one real API server: it registers N
// clusters and M Applications marked for them (spread evenly), starts the manager binary as a
// process, and prints the time until every Application is delivered as a ManifestWork, then
// writes every ManifestWork's status feedback (the work agents' part, 16 writers) and prints the
// time until every hub Application shows it, with the API writes per Application of each phase
// as counted by the API server's own metrics. Then the fleet idles while every spoke Argo CD
// refreshes each Application periodically (its reconcile time changes every --refresh), and the
// benchmark counts the work agents' status writes and the hub Application writes per idle
// minute. The simulated work agent behaves as OCM's: it reports only the fields the
// ManifestWork's feedback rules name and writes status only when they change. Last, the
// manager's peak resident memory.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const argoNS = "argocd"

func main() {
	clusters := flag.Int("clusters", 500, "managed clusters")
	apps := flag.Int("apps", 5000, "Applications, spread evenly over the clusters")
	idle := flag.Duration("idle", time.Minute, "how long to watch the idle fleet for writes")
	refresh := flag.Duration("refresh", 20*time.Second, "how often each spoke Argo CD refreshes each Application while idle (Argo CD's default is 120s; shorter packs more refreshes into the idle period)")
	binary := flag.String("manager", "bin/argocd-agent-addon", "path of the manager binary")
	flag.Var(&managerArgs, "manager-arg", "an extra manager flag, e.g. --manager-arg=--pull-model-concurrency=16 (repeatable)")
	flag.Parse()
	if err := run(*clusters, *apps, *idle, *refresh, *binary); err != nil {
		fmt.Fprintln(os.Stderr, "pullmodel bench:", err)
		os.Exit(1)
	}
}

// managerArgs are extra flags for the manager under test.
var managerArgs stringList

type stringList []string

func (l *stringList) String() string     { return fmt.Sprint([]string(*l)) }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func run(nClusters, nApps int, idle, refresh time.Duration, binary string) error {
	ctx := context.Background()
	env, err := testenv.Start(testenv.Options{WithArgoCD: true})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	env.Config.QPS, env.Config.Burst = 2000, 4000
	c, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argoNS}}); err != nil {
		return err
	}
	start := time.Now()
	if err := parallel(nClusters, func(i int) error {
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
	if err := parallel(nApps, func(i int) error { return c.Create(ctx, application(i, nClusters)) }); err != nil {
		return err
	}
	fmt.Printf("setup: %d clusters and %d Applications created in %s\n", nClusters, nApps, time.Since(start).Round(10*time.Millisecond))

	dir, err := os.MkdirTemp("", "pullmodel-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig, err := env.KubeconfigFile(dir)
	if err != nil {
		return err
	}
	before, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return err
	}
	args := append([]string{"manager", "--kubeconfig=" + kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--managed-namespaces=bench", "--zap-log-level=error"}, managerArgs...)
	cmd := exec.Command(binary, args...)
	logf, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()

	if err := waitFor("every Application delivered", 20*time.Minute, func() (bool, error) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: workv1.GroupName, Version: "v1", Kind: "ManifestWorkList"})
		if err := c.List(ctx, list, client.HasLabels{pullmodel.LabelPull}); err != nil {
			return false, err
		}
		return len(list.Items) == nApps, nil
	}); err != nil {
		return err
	}
	propagate := time.Since(t0)
	time.Sleep(2 * time.Second)
	mid, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return err
	}
	d1 := testenv.DiffWrites(before, mid)

	// The work agents' part: each ManifestWork reports its Application Synced and Healthy.
	works := &workv1.ManifestWorkList{}
	if err := c.List(ctx, works, client.HasLabels{pullmodel.LabelPull}); err != nil {
		return err
	}
	agent := newWorkAgent(c, works.Items)
	settled := map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy", "syncRevision": "0123456789abcdef", "reconciledAt": time.Now().UTC().Format(time.RFC3339)}
	t1 := time.Now()
	if _, err := agent.report(ctx, func(int) map[string]string { return settled }); err != nil {
		return err
	}
	fed := time.Since(t1)
	if err := waitFor("every hub Application Synced Healthy", 20*time.Minute, func() (bool, error) {
		list := pullmodel.NewApplicationList()
		if err := c.List(ctx, list, client.InNamespace(argoNS)); err != nil {
			return false, err
		}
		n := 0
		for _, a := range list.Items {
			h, _, _ := unstructured.NestedString(a.Object, "status", "health", "status")
			if h == "Healthy" {
				n++
			}
		}
		return n == nApps, nil
	}); err != nil {
		return err
	}
	statusTime := time.Since(t1)
	time.Sleep(2 * time.Second)
	after, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return err
	}
	d2 := testenv.DiffWrites(mid, after)

	// Idle, with every spoke Argo CD refreshing every Application each period: only the
	// reconcile time changes.
	agentWrites := 0
	idleStart := time.Now()
	for time.Since(idleStart) < idle {
		at := time.Now().UTC().Format(time.RFC3339)
		n, err := agent.report(ctx, func(int) map[string]string {
			v := maps.Clone(settled)
			v["reconciledAt"] = at
			return v
		})
		if err != nil {
			return err
		}
		agentWrites += n
		time.Sleep(min(refresh, idle-time.Since(idleStart)))
	}
	idleFor := time.Since(idleStart)
	final, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return err
	}
	d3 := testenv.DiffWrites(after, final)
	perMinute := func(n int) float64 { return float64(n) / idleFor.Minutes() }
	peak, err := peakRSS(cmd.Process.Pid)
	if err != nil {
		return err
	}

	fmt.Printf("propagation: %d ManifestWorks in %s after the manager started; writes %v = %.2f per Application\n",
		nApps, propagate.Round(10*time.Millisecond), d1, float64(testenv.TotalWrites(d1))/float64(nApps))
	fmt.Printf("status:      feedback written in %s (benchmark's own %d ManifestWork status writes); every hub Application Healthy %s after the first; manager's Application writes %d = %.2f per Application\n",
		fed.Round(10*time.Millisecond), d2["manifestworks/status"], statusTime.Round(10*time.Millisecond), d2["applications"], float64(d2["applications"])/float64(nApps))
	fmt.Printf("idle:        %s with each of the %d spoke Applications refreshed every %s: work-agent status writes %.1f/min, hub Application writes %.1f/min, all writes %.1f/min %v\n",
		idleFor.Round(time.Second), nApps, refresh, perMinute(agentWrites), perMinute(d3["applications"]), perMinute(testenv.TotalWrites(d3)), d3)
	fmt.Printf("memory:      manager peak RSS %d MiB\n", peak>>20)
	return nil
}

// workAgent plays OCM's work agents: for each ManifestWork it reports the spoke Application's
// fields its feedback rules name, and writes the ManifestWork's status only when they changed.
type workAgent struct {
	c     client.Client
	works []workv1.ManifestWork
	ruled []map[string]bool
	last  []map[string]string
}

func newWorkAgent(c client.Client, works []workv1.ManifestWork) *workAgent {
	a := &workAgent{c: c, works: works, ruled: make([]map[string]bool, len(works)), last: make([]map[string]string, len(works))}
	for i, w := range works {
		a.ruled[i] = map[string]bool{}
		for _, mc := range w.Spec.ManifestConfigs {
			for _, r := range mc.FeedbackRules {
				for _, p := range r.JsonPaths {
					a.ruled[i][p.Name] = true
				}
			}
		}
	}
	return a
}

// report gives each ManifestWork i the spoke values spoke(i) and returns the status writes made.
func (a *workAgent) report(ctx context.Context, spoke func(i int) map[string]string) (int, error) {
	var mu sync.Mutex
	writes := 0
	err := parallel(len(a.works), func(i int) error {
		fed := map[string]string{}
		for k, v := range spoke(i) {
			if a.ruled[i][k] {
				fed[k] = v
			}
		}
		if a.last[i] != nil && maps.Equal(a.last[i], fed) {
			return nil
		}
		w := &a.works[i]
		w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now(), ObservedGeneration: w.Generation}}
		var fb []workv1.FeedbackValue
		for _, k := range slices.Sorted(maps.Keys(fed)) {
			fb = append(fb, workv1.FeedbackValue{Name: k, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(fed[k])}})
		}
		w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application", Resource: "applications"}, StatusFeedbacks: workv1.StatusFeedbackResult{Values: fb},
			Conditions: []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now()}}}}
		if err := a.c.Status().Update(ctx, w); err != nil {
			return err
		}
		a.last[i] = fed
		mu.Lock()
		writes++
		mu.Unlock()
		return nil
	})
	return writes, err
}

// peakRSS is a process's peak resident set size (VmHWM), in bytes.
func peakRSS(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// benchSet is the ManagedClusterSet of the benchmark's clusters.
const benchSet = "bench"

func application(i, nClusters int) *unstructured.Unstructured {
	app := pullmodel.NewApplication()
	app.SetNamespace(argoNS)
	app.SetName(fmt.Sprintf("app-%05d", i))
	app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
	app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: fmt.Sprintf("cluster-%04d", i%nClusters), pullmodel.AnnotationSkipReconcile: "true"})
	app.Object["spec"] = map[string]any{
		"project":     "default",
		"source":      map[string]any{"repoURL": "https://git.example/apps", "path": fmt.Sprintf("apps/%d", i), "targetRevision": "main"},
		"destination": map[string]any{"server": pullmodel.InClusterServer, "namespace": "apps"},
		"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true}},
	}
	return app
}

// parallel runs f(0..n-1) with 16 workers and returns the first error.
func parallel(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func waitFor(what string, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s (last error %v)", what, timeout, err)
		}
		time.Sleep(time.Second)
	}
}
