// Command pullmodel benchmarks the basic pull model on one real API server: it registers N
// clusters and M Applications marked for them (spread evenly), starts the manager binary as a
// process, and prints the time until every Application is delivered as a ManifestWork, then
// writes every ManifestWork's status feedback (the work agents' part, 16 writers) and prints the
// time until every hub Application shows it, with the API writes per Application of each phase
// as counted by the API server's own metrics, and the writes during an idle period.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	idle := flag.Duration("idle", 30*time.Second, "how long to watch the idle fleet for writes")
	binary := flag.String("manager", "bin/argocd-agent-addon", "path of the manager binary")
	flag.Var(&managerArgs, "manager-arg", "an extra manager flag, e.g. --manager-arg=--pull-model-concurrency=16 (repeatable)")
	flag.Parse()
	if err := run(*clusters, *apps, *idle, *binary); err != nil {
		fmt.Fprintln(os.Stderr, "pullmodel bench:", err)
		os.Exit(1)
	}
}

// managerArgs are extra flags for the manager under test.
var managerArgs stringList

type stringList []string

func (l *stringList) String() string     { return fmt.Sprint([]string(*l)) }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func run(nClusters, nApps int, idle time.Duration, binary string) error {
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
	t1 := time.Now()
	if err := parallel(len(works.Items), func(i int) error {
		w := &works.Items[i]
		w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now(), ObservedGeneration: w.Generation}}
		var fb []workv1.FeedbackValue
		for k, v := range map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy", "syncRevision": "0123456789abcdef", "reconciledAt": "2026-01-01T00:00:00Z"} {
			fb = append(fb, workv1.FeedbackValue{Name: k, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(v)}})
		}
		w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application", Resource: "applications"}, StatusFeedbacks: workv1.StatusFeedbackResult{Values: fb},
			Conditions: []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now()}}}}
		return c.Status().Update(ctx, w)
	}); err != nil {
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
	time.Sleep(idle)
	final, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return err
	}
	d3 := testenv.DiffWrites(after, final)

	fmt.Printf("propagation: %d ManifestWorks in %s after the manager started; writes %v = %.2f per Application\n",
		nApps, propagate.Round(10*time.Millisecond), d1, float64(testenv.TotalWrites(d1))/float64(nApps))
	fmt.Printf("status:      feedback written in %s (benchmark's own %d ManifestWork status writes); every hub Application Healthy %s after the first; manager's Application writes %d = %.2f per Application\n",
		fed.Round(10*time.Millisecond), d2["manifestworks/status"], statusTime.Round(10*time.Millisecond), d2["applications"], float64(d2["applications"])/float64(nApps))
	fmt.Printf("idle:        %d writes in %s %v\n", testenv.TotalWrites(d3), idle, d3)
	return nil
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
