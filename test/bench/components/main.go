// Command components measures what the Argo CD components cost the hub's etcd per cluster: it
// starts the local fleet's hub (OCM's own controllers, addon-manager included, and one real
// managed cluster), adds simulated ManagedClusters (accepted, no agent), runs the manager under
// the chart's RBAC, applies a GitOpsCluster that installs the components on all of them, waits
// until OCM's addon-manager has rendered their ManifestWorks for every cluster, and prints the
// growth of etcd's database (in use, after compaction) per cluster, with the ManifestWorks' own
// size, for each agent mode on a hub of its own. With --direct the clusters' namespaces are
// created by the benchmark rather than by OCM's registration controller, which takes long to
// make thousands.
//
// The simulated clusters run no work agent, so their ManifestWorks carry no status; on a real
// fleet each also holds the work agent's status (about 300 bytes per manifest).
package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/parallel"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const ns = "bench"

func main() {
	n := flag.Int("clusters", 200, "simulated managed clusters")
	modes := flag.String("mode", "managed,autonomous", "agent modes, comma-separated: each is measured on a hub of its own")
	binary := flag.String("manager", "bin/argocd-agent-addon", "path of the manager binary")
	flag.BoolVar(&direct, "direct", false, "create the simulated clusters' namespaces directly instead of waiting for OCM's registration controller to make them (for thousands of clusters)")
	flag.DurationVar(&timeout, "timeout", timeout, "how long each wait may take")
	quota := flag.String("etcd-quota", "", "the hub etcd's --quota-backend-bytes as a quantity (e.g. 8Gi); etcd's default is 2Gi, which the autonomous mode's components fill at about 4,400 clusters")
	results := benchkit.ResultsFlag()
	managerArgs = benchkit.ManagerArgsFlag("--pprof-bind-address=127.0.0.1:6061")
	addonManagerArgs = benchkit.ArgsFlag("addon-manager-arg", "OCM addon-manager", "--kube-api-qps=500")
	flag.Parse()
	if *quota != "" {
		q, err := resource.ParseQuantity(*quota)
		if err != nil || q.Value() <= 0 {
			fmt.Fprintf(os.Stderr, "error: --etcd-quota %q: want a positive quantity such as 8Gi\n", *quota)
			os.Exit(2)
		}
		etcdQuota = q.Value()
	}
	out := benchkit.NewOutput()
	var err error
	for _, mode := range strings.Split(*modes, ",") {
		if err = run(*n, strings.TrimSpace(mode), *binary, out); err != nil {
			out.Printf("mode %s: error: %v\n", mode, err)
			break
		}
	}
	if aerr := out.Append(*results, "components"); aerr != nil {
		fmt.Fprintln(os.Stderr, "error:", aerr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// managerArgs are extra flags for the manager under test.
var managerArgs *benchkit.Strings

// addonManagerArgs are extra flags for OCM's addon-manager (its client's default is 50 QPS).
var addonManagerArgs *benchkit.Strings

// direct creates the clusters' namespaces without OCM's registration controller.
var direct bool

// etcdQuota is the hub etcd's --quota-backend-bytes (--etcd-quota); 0 leaves etcd's default.
var etcdQuota int64

// defaultEtcdQuota is etcd's own --quota-backend-bytes default.
const defaultEtcdQuota = 2 << 30

// timeout bounds each wait.
var timeout = time.Hour

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(n int, mode, binary string, out *benchkit.Output) error {
	ctx, cancel := context.WithTimeout(context.Background(), 4*timeout)
	defer cancel()
	f, hub, err := startHub(ctx, binary)
	if err != nil {
		return err
	}
	defer func() { _ = f.Stop() }()
	if err := createClusters(ctx, hub, f.ClusterSet(), n); err != nil {
		return err
	}
	time.Sleep(40 * time.Second) // two compactions
	before, err := etcdInUse(ctx, f.HubEtcdURL())
	if err != nil {
		return err
	}
	start, cpuBefore := time.Now(), cpuOf(f)
	if err := installEverywhere(ctx, hub, mode, n); err != nil {
		return err
	}
	rendered, cpu := time.Since(start), since(cpuOf(f), cpuBefore)
	how := "namespaces made by OCM's registration controller"
	if direct {
		how = "namespaces created by the benchmark (--direct)"
	}
	out.Printf("mode %s, %d simulated clusters (%s): components rendered for all in %s\n", mode, n, how, rendered.Round(time.Second))
	out.Printf("  CPU while OCM rendered them: %s; the manager %s per cluster\n", cpu, cpu.perCluster(managerName, n))
	time.Sleep(40 * time.Second) // two compactions
	after, err := etcdInUse(ctx, f.HubEtcdURL())
	if err != nil {
		return err
	}
	bytesBy, err := workBytes(ctx, hub)
	if err != nil {
		return err
	}
	out.Printf("  hub etcd database in use: %d -> %d bytes, %.0f bytes per cluster (every object of the install, compacted, with managed fields and etcd's own overhead)\n",
		before, after, float64(after-before)/float64(n))
	out.Printf("  ManifestWorks per cluster (JSON without managed fields): components %d bytes, agent %d bytes, probe %d bytes\n",
		bytesBy["components"]/n, bytesBy["agent"]/(n+1), bytesBy["probe"]/max(1, n))
	quota, which := int64(defaultEtcdQuota), "etcd's default"
	if etcdQuota > 0 {
		quota, which = etcdQuota, "--etcd-quota"
	}
	out.Printf("  the whole hub etcd in use: %.2f GB for %d clusters (quota %.2f GB, %s)\n", float64(after)/1e9, n, float64(quota)/1e9, which)
	return nil
}

// startHub starts the local fleet's hub and the manager under the chart's RBAC.
func startHub(ctx context.Context, binary string) (*fleet.Fleet, client.Client, error) {
	bin, err := filepath.Abs(binary)
	if err != nil {
		return nil, nil, err
	}
	// The API server compacts etcd every 15 s (5 minutes by default), so that the sizes read
	// below hold the objects' current revisions, not the history of their writes.
	var etcdArgs []string
	if etcdQuota > 0 {
		etcdArgs = []string{"--quota-backend-bytes=" + strconv.FormatInt(etcdQuota, 10)}
	}
	f, err := fleet.Start(ctx, fleet.Options{Clusters: []string{"cluster1"}, BindingNamespace: ns,
		HubCRDPaths:   []string{filepath.Join(testenv.RepoRoot(), "manifests", "crds")},
		APIServerArgs: []string{"--etcd-compaction-interval=15s"}, HubEtcdArgs: etcdArgs, Logf: logf,
		HubControllerArgs: map[string][]string{"addon-manager": *addonManagerArgs}})
	if err != nil {
		return nil, nil, err
	}
	hub, err := startManager(ctx, f, bin)
	if err != nil {
		_ = f.Stop()
		return nil, nil, err
	}
	return f, hub, nil
}

func startManager(ctx context.Context, f *fleet.Fleet, bin string) (client.Client, error) {
	scheme := fleet.Scheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	hub, err := client.New(f.HubConfig(), client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	if err := fleet.EnsureNamespaces(ctx, hub, ns); err != nil {
		return nil, err
	}
	install, err := testenv.InstallChart(ctx, hub, ns, map[string]any{"managedNamespaces": []any{ns}})
	if err != nil {
		return nil, err
	}
	sa := testenv.ServiceAccount(ns, install.ServiceAccount)
	kubeconfig, _, err := f.HubUserKubeconfig("argocd-agent-addon-manager", sa.User, sa.Groups...)
	if err != nil {
		return nil, err
	}
	_, err = f.StartProcess(fleet.ProcessSpec{Name: managerName, Path: bin, Args: install.Args(append([]string{
		"--kubeconfig=" + kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-elect=false"}, *managerArgs...)...)})
	return hub, err
}

const managerName = "argocd-agent-addon-manager"

// processCPU is the CPU each process of the fleet has used, by its name.
type processCPU map[string]cpuSample

// cpuSample is one process's CPU. A process that exited has none to read (0): a difference
// across its exit is not its CPU over the interval, and says so.
type cpuSample struct {
	used   time.Duration
	exited bool
}

func cpuOf(f *fleet.Fleet) processCPU {
	out := processCPU{}
	for _, p := range f.Processes() {
		out[p.Name] = cpuSample{used: benchkit.ProcessCPU(p.Pid()), exited: !benchkit.Running(p.Pid())}
	}
	return out
}

func since(after, before processCPU) processCPU {
	out := processCPU{}
	for name, a := range after {
		if a.exited {
			out[name] = a
			continue
		}
		out[name] = cpuSample{used: a.used - before[name].used}
	}
	return out
}

// String lists the processes that used a tenth of a second or more, the busiest first, and
// every process that exited.
func (c processCPU) String() string {
	names := slices.Collect(maps.Keys(c))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(c[b].used, c[a].used), cmp.Compare(a, b)) })
	var parts []string
	for _, name := range names {
		switch s := c[name]; {
		case s.exited:
			parts = append(parts, name+" exited")
		case s.used >= 100*time.Millisecond:
			parts = append(parts, fmt.Sprintf("%s %.1fs", name, s.used.Seconds()))
		}
	}
	return strings.Join(parts, ", ")
}

// perCluster is the CPU of process name per cluster, or why there is none.
func (c processCPU) perCluster(name string, n int) string {
	if c[name].exited {
		return "unknown (it exited)"
	}
	return benchkit.Ms(benchkit.PerUnit(c[name].used, n))
}

const componentsAddon = "argocd-agent-addon-argocd"

// installEverywhere applies a Placement of every simulated cluster and a GitOpsCluster that
// installs the components on them, and waits until OCM's addon-manager has rendered them for
// every cluster. No agent runs on the simulated clusters: OCM taints them unavailable, and no
// probe answers, so the GitOpsCluster takes the explicit choice to install everywhere.
func installEverywhere(ctx context.Context, hub client.Client, mode string, n int) error {
	tolerate := []clusterv1beta1.Toleration{
		{Key: clusterv1.ManagedClusterTaintUnavailable, Operator: clusterv1beta1.TolerationOpExists},
		{Key: clusterv1.ManagedClusterTaintUnreachable, Operator: clusterv1beta1.TolerationOpExists},
	}
	pl := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "components"}, Spec: clusterv1beta1.PlacementSpec{
		Predicates: []clusterv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterv1beta1.ClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"bench": "components"}}}}},
		Tolerations: tolerate}}
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "components"}, Spec: v1alpha1.GitOpsClusterSpec{
		PlacementRef: v1alpha1.PlacementReference{Kind: v1alpha1.PlacementKind, Name: pl.Name},
		ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{Mode: v1alpha1.AgentMode(mode), PrincipalServerAddress: "principal.example.com",
			PrincipalServerPort: &intstr.IntOrString{Type: intstr.Int, IntVal: 443}, ExistingArgoCD: v1alpha1.ExistingArgoCDReplace}}}
	for _, o := range []client.Object{pl, goc} {
		if err := hub.Create(ctx, o); err != nil {
			return err
		}
	}
	return waitFor(ctx, "OCM's addon-manager rendering the components for every cluster", func() (bool, string) {
		// Metadata only: the full objects are 70 to 430 KB each, and listing them every few
		// seconds would make the API server, not OCM, the pace of the wait.
		works := metav1.PartialObjectMetadataList{}
		works.SetGroupVersionKind(schema.GroupVersionKind{Group: workv1.GroupName, Version: "v1", Kind: "ManifestWorkList"})
		if err := hub.List(ctx, &works, client.MatchingLabels{"open-cluster-management.io/addon-name": componentsAddon}); err != nil {
			return false, err.Error()
		}
		clusters := map[string]bool{}
		for _, w := range works.Items {
			clusters[w.Namespace] = true
		}
		return len(clusters) >= n, fmt.Sprintf("%d of %d clusters", len(clusters), n)
	})
}

// workBytes sums the ManifestWorks' JSON (without managed fields) by kind: the components,
// the agent, the probes, the rest. It reads them a cluster namespace at a time: at thousands of
// clusters in autonomous mode they are gigabytes, and a paged list's continue token does not
// outlive the API server's compactions every 15 s.
func workBytes(ctx context.Context, hub client.Client) (map[string]int, error) {
	var namespaces corev1.NamespaceList
	if err := hub.List(ctx, &namespaces, client.HasLabels{clusterv1.ClusterNameLabelKey}); err != nil {
		return nil, err
	}
	bytesBy := map[string]int{}
	for _, namespace := range namespaces.Items {
		var works workv1.ManifestWorkList
		if err := hub.List(ctx, &works, client.InNamespace(namespace.Name)); err != nil {
			return nil, err
		}
		addWorkBytes(bytesBy, works.Items)
	}
	return bytesBy, nil
}

func addWorkBytes(bytesBy map[string]int, works []workv1.ManifestWork) {
	for _, w := range works {
		w.ManagedFields = nil
		raw, _ := json.Marshal(w)
		kind := "other"
		switch w.Labels["open-cluster-management.io/addon-name"] {
		case componentsAddon:
			kind = "components"
		case "argocd-agent-addon":
			kind = "agent"
		}
		if strings.HasPrefix(w.Name, "argocd-agent-addon-probe-") {
			kind = "probe"
		}
		bytesBy[kind] += len(raw)
	}
}

// createClusters creates n simulated ManagedClusters, accepted, with no agent, and waits for
// their namespaces: made by OCM's registration controller, or with --direct by this benchmark.
func createClusters(ctx context.Context, hub client.Client, set string, n int) error {
	logf("creating %d simulated managed clusters", n)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("sim-%05d", i)
	}
	var mu sync.Mutex
	var firstErr error
	parallel.Each(16, names, func(name string) {
		err := createCluster(ctx, hub, set, name)
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		}
	})
	if firstErr != nil {
		return firstErr
	}
	return waitFor(ctx, "the simulated clusters' namespaces", func() (bool, string) {
		var list corev1.NamespaceList
		if err := hub.List(ctx, &list, client.HasLabels{clusterv1.ClusterNameLabelKey}); err != nil {
			return false, err.Error()
		}
		return len(list.Items) >= n+1, fmt.Sprintf("%d of %d", len(list.Items), n+1)
	})
}

func createCluster(ctx context.Context, hub client.Client, set, name string) error {
	if direct {
		// As OCM's registration controller makes it: labelled with the cluster's name.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{clusterv1.ClusterNameLabelKey: name}}}
		if err := hub.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		clusterv1beta2.ClusterSetLabel: set, "bench": "components"}},
		Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
	return hub.Create(ctx, mc)
}

func waitFor(ctx context.Context, what string, cond func() (bool, string)) error {
	last := ""
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		ok, state := cond()
		if ok {
			logf("%s: done", what)
			return nil
		}
		if state != last {
			logf("%s: %s", what, state)
			last = state
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%s: gave up (%s)", what, last)
}

// etcdInUse reads etcd's logical database size from its metrics.
func etcdInUse(ctx context.Context, etcdURL string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, etcdURL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "etcd_mvcc_db_total_size_in_use_in_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("no etcd_mvcc_db_total_size_in_use_in_bytes in %s/metrics", etcdURL)
}
