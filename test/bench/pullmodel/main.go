// Command pullmodel benchmarks the basic pull model on one real API server: it registers N
// clusters and M Applications marked for them (spread evenly), owned by ApplicationSets as a
// clusterDecisionResource generator's are, starts the manager binary as a process, and prints
// the time until every Application is delivered as a ManifestWork, then plays the work agents
// (16 writers) and prints the time until every hub Application shows their feedback (sync,
// health, a warning listed first and, for every tenth, a SyncError after it, the resource
// reporter's list), with the API writes per Application of each phase as counted by the API
// server's own metrics. Then every Application is synced in RollingSync's order (the request on
// the hub, run on the spoke, cleared, then the spoke's reconcile after it), until no ManifestWork
// reads the reconcile time any more. Then the fleet idles while every spoke Argo CD refreshes
// each Application periodically (its reconcile time changes every --refresh), and the benchmark
// counts every write: "idle writes" must be 0. The simulated work agent behaves as OCM's: every
// round it reads each ManifestWork's current rules, evaluates their JSONPaths on the spoke
// Application as OCM's status reader does, and writes status only when the values or the
// generation changed. Last, the manager's peak resident memory.
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
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/jsonpath"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const argoNS = "argocd"

func main() {
	clusters := flag.Int("clusters", 500, "managed clusters")
	apps := flag.Int("apps", 5000, "Applications, spread evenly over the clusters")
	flag.DurationVar(&phaseTimeout, "timeout", 20*time.Minute, "how long each phase may take")
	appsets := flag.Int("appsets", 0, "ApplicationSets owning the Applications (round robin); default one per 100 Applications")
	idle := flag.Duration("idle", time.Minute, "how long to watch the idle fleet for writes")
	refresh := flag.Duration("refresh", 20*time.Second, "how often each spoke Argo CD refreshes each Application while idle (Argo CD's default is 120s; shorter packs more refreshes into the idle period)")
	binary := flag.String("manager", "bin/argocd-agent-addon", "path of the manager binary")
	flag.Var(&managerArgs, "manager-arg", "an extra manager flag, e.g. --manager-arg=--pull-model-concurrency=16 (repeatable)")
	flag.Parse()
	if *appsets < 1 {
		*appsets = max(1, *apps/100)
	}
	if err := run(*clusters, *apps, *appsets, *idle, *refresh, *binary); err != nil {
		fmt.Fprintln(os.Stderr, "pullmodel bench:", err)
		os.Exit(1)
	}
}

// phaseTimeout bounds each phase's wait.
var phaseTimeout time.Duration

// managerArgs are extra flags for the manager under test.
var managerArgs stringList

type stringList []string

func (l *stringList) String() string     { return fmt.Sprint([]string(*l)) }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func run(nClusters, nApps, nSets int, idle, refresh time.Duration, binary string) error {
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
	// ApplicationSets own the Applications, as a clusterDecisionResource generator's do: their
	// Applications are the ones whose ManifestWorks read the spoke's reconcile time after a sync.
	sets := make([]*unstructured.Unstructured, nSets)
	for k := range sets {
		set := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"generators": []any{map[string]any{"list": map[string]any{"elements": []any{}}}},
			"template":   map[string]any{"metadata": map[string]any{"name": "{{name}}"}, "spec": map[string]any{"project": "default", "destination": map[string]any{"server": pullmodel.InClusterServer}}},
		}}}
		set.SetGroupVersionKind(pullmodel.ApplicationSetGVK)
		set.SetNamespace(argoNS)
		set.SetName(fmt.Sprintf("set-%03d", k))
		if err := c.Create(ctx, set); err != nil {
			return err
		}
		sets[k] = set
	}
	if err := parallel(nApps, func(i int) error { return c.Create(ctx, application(i, nClusters, sets[i%nSets])) }); err != nil {
		return err
	}
	fmt.Printf("setup: %d clusters, %d ApplicationSets and %d Applications created in %s\n", nClusters, nSets, nApps, time.Since(start).Round(10*time.Millisecond))

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

	if err := waitFor("every Application delivered", phaseTimeout, func() (bool, error) {
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

	// The work agents' part: each spoke Application is Synced and Healthy, lists a warning
	// first (Argo CD sorts conditions by type) and, for every tenth, a SyncError after it, and
	// carries the resource reporter's list of its objects.
	agent := &workAgent{c: c, last: map[string]map[string]string{}}
	spokes := make([]*spokeApp, nApps)
	for i := range spokes {
		spokes[i] = &spokeApp{sync: "Synced", health: "Healthy", reconciledAt: time.Now().UTC().Add(-time.Hour).Format(time.RFC3339), syncError: i%10 == 0, resources: resourcesOf(i)}
	}
	t1 := time.Now()
	if _, err := agent.report(ctx, spokes); err != nil {
		return err
	}
	fed := time.Since(t1)
	if err := waitApps(ctx, c, nApps, "every hub Application Healthy, with its resources and its SyncError", func(i int, a *unstructured.Unstructured) bool {
		h, _, _ := unstructured.NestedString(a.Object, "status", "health", "status")
		res, _, _ := unstructured.NestedSlice(a.Object, "status", "resources")
		return h == "Healthy" && len(res) == len(spokes[i].resources) && hasCondition(a, "SyncError") == spokes[i].syncError
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

	// A sync of every Application, in RollingSync's order: the ApplicationSet asks (its
	// request on the hub Application), the spoke runs it and records its end, the hub clears
	// the request, then the spoke reconciles once more, and progressive sync reads that time.
	t2 := time.Now()
	if err := parallel(nApps, func(i int) error {
		app := pullmodel.NewApplication()
		app.SetNamespace(argoNS)
		app.SetName(appName(i))
		return c.Patch(ctx, app, client.RawPatch(types.MergePatchType, []byte(rollingSyncOperation)))
	}); err != nil {
		return err
	}
	if err := waitWorks(ctx, c, nApps, "every ManifestWork carrying the request", func(w *workv1.ManifestWork) bool {
		return propagation.Operation(w) != nil
	}); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, sp := range spokes {
		sp.opPhase, sp.opStarted, sp.opFinished = "Succeeded", now.Format(time.RFC3339), now.Add(time.Second).Format(time.RFC3339)
	}
	if _, err := agent.report(ctx, spokes); err != nil {
		return err
	}
	if err := waitApps(ctx, c, nApps, "every hub request cleared", func(_ int, a *unstructured.Unstructured) bool {
		_, op := a.Object["operation"]
		phase, _, _ := unstructured.NestedString(a.Object, "status", "operationState", "phase")
		return !op && phase == "Succeeded"
	}); err != nil {
		return err
	}
	reconciled := now.Add(3 * time.Second).Format(time.RFC3339)
	for _, sp := range spokes {
		sp.reconciledAt = reconciled
	}
	// The spoke's reconcile after the sync: reported under the rules each ManifestWork has now,
	// again until no ManifestWork reads the reconcile time.
	if err := waitFor("every hub Application showing the reconcile after its sync, and no ManifestWork reading the reconcile time", phaseTimeout, func() (bool, error) {
		if _, err := agent.report(ctx, spokes); err != nil {
			return false, err
		}
		works, err := listWorks(ctx, c)
		if err != nil {
			return false, err
		}
		for i := range works {
			if propagation.FeedsBackReconcileTime(&works[i]) {
				return false, nil
			}
		}
		apps := pullmodel.NewApplicationList()
		if err := c.List(ctx, apps, client.InNamespace(argoNS)); err != nil {
			return false, err
		}
		for _, a := range apps.Items {
			if at, _, _ := unstructured.NestedString(a.Object, "status", "reconciledAt"); at != reconciled {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	// The work agents' status write for the ManifestWorks' last change (the reconcile time's
	// rule gone), as OCM's agent makes after a spec change.
	if _, err := agent.report(ctx, spokes); err != nil {
		return err
	}
	syncTime := time.Since(t2)
	time.Sleep(2 * time.Second)
	synced, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return err
	}
	d3 := testenv.DiffWrites(after, synced)

	// Idle, with every spoke Argo CD refreshing every Application each period: only the
	// reconcile time changes. The work agents read each ManifestWork's rules anew every round.
	agentWrites := 0
	idleStart := time.Now()
	for time.Since(idleStart) < idle {
		at := time.Now().UTC().Format(time.RFC3339)
		for _, sp := range spokes {
			sp.reconciledAt = at
		}
		n, err := agent.report(ctx, spokes)
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
	d4 := testenv.DiffWrites(synced, final)
	perMinute := func(n int) float64 { return float64(n) / idleFor.Minutes() }
	peak, err := peakRSS(cmd.Process.Pid)
	if err != nil {
		return err
	}

	fmt.Printf("propagation: %d ManifestWorks in %s after the manager started; writes %v = %.2f per Application\n",
		nApps, propagate.Round(10*time.Millisecond), d1, float64(testenv.TotalWrites(d1))/float64(nApps))
	fmt.Printf("status:      feedback written in %s (benchmark's own %d ManifestWork status writes); every hub Application Healthy, with resources and errors, %s after the first; manager's Application writes %d = %.2f per Application\n",
		fed.Round(10*time.Millisecond), d2["manifestworks/status"], statusTime.Round(10*time.Millisecond), d2["applications"], float64(d2["applications"])/float64(nApps))
	fmt.Printf("sync:        %d RollingSync requests run and the reconcile after them shown in %s; per Application: %.2f ManifestWork writes, %.2f manager Application writes (besides the benchmark's own request), %.2f work-agent status writes\n",
		nApps, syncTime.Round(10*time.Millisecond), float64(d3["manifestworks"])/float64(nApps), float64(d3["applications"]-nApps)/float64(nApps), float64(d3["manifestworks/status"])/float64(nApps))
	fmt.Printf("idle:        %s with each of the %d spoke Applications refreshed every %s: work-agent status writes %.1f/min, hub Application writes %.1f/min, all writes %.1f/min %v\n",
		idleFor.Round(time.Second), nApps, refresh, perMinute(agentWrites), perMinute(d4["applications"]), perMinute(testenv.TotalWrites(d4)), d4)
	fmt.Printf("idle writes: %d (must be 0)\n", agentWrites+testenv.TotalWrites(d4))
	fmt.Printf("memory:      manager peak RSS %d MiB\n", peak>>20)
	if agentWrites+testenv.TotalWrites(d4) != 0 {
		return fmt.Errorf("the idle fleet wrote %d times", agentWrites+testenv.TotalWrites(d4))
	}
	return nil
}

// rollingSyncOperation is the sync request Argo CD's ApplicationSet RollingSync puts on an
// Application (v3.6 progressivesync.syncApplication).
const rollingSyncOperation = `{"operation":{"initiatedBy":{"username":"applicationset-controller","automated":true},` +
	`"info":[{"name":"Reason","value":"ApplicationSet RollingSync triggered a sync of this Application resource"}],` +
	`"sync":{"revision":"0123456789abcdef","prune":true,"syncOptions":["CreateNamespace=true"]},"retry":{"limit":5}}}`

// spokeApp is what the benchmark's spoke Argo CD shows of one Application.
type spokeApp struct {
	sync, health, reconciledAt     string
	opPhase, opStarted, opFinished string
	syncError                      bool
	resources                      []resourcelist.Resource
}

// object is the spoke Application as OCM's work agent reads it.
func (s *spokeApp) object() map[string]any {
	st := map[string]any{
		"sync":         map[string]any{"status": s.sync, "revision": "0123456789abcdef"},
		"health":       map[string]any{"status": s.health},
		"reconciledAt": s.reconciledAt,
	}
	conds := []any{map[string]any{"type": "OrphanedResourceWarning", "message": "Application has 1 orphaned resources", "lastTransitionTime": "2026-01-01T00:00:00Z"}}
	if s.syncError {
		conds = append(conds, map[string]any{"type": "SyncError", "message": "one or more synchronization tasks are not valid", "lastTransitionTime": "2026-01-01T00:00:01Z"})
	}
	st["conditions"] = conds
	if s.opPhase != "" {
		st["operationState"] = map[string]any{"phase": s.opPhase, "startedAt": s.opStarted, "finishedAt": s.opFinished, "message": "successfully synced (all tasks run)"}
	}
	return map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{pullmodel.AnnotationResourceList: resourcelist.Encode(s.resources)}},
		"status":   st,
	}
}

func resourcesOf(i int) []resourcelist.Resource {
	return []resourcelist.Resource{
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "apps", Name: fmt.Sprintf("app-%05d", i)},
		{Version: "v1", Kind: "Service", Namespace: "apps", Name: fmt.Sprintf("app-%05d", i)},
		{Version: "v1", Kind: "ConfigMap", Namespace: "apps", Name: fmt.Sprintf("app-%05d-settings", i)},
	}
}

// workAgent plays OCM's work agents (v1.2.1 without its RawFeedbackJsonString gate): for each
// ManifestWork it reads, every round, the rules the ManifestWork has now, evaluates their
// JSONPaths on the spoke Application as OCM's status reader does (missing keys allowed, the
// first of several values), and writes the ManifestWork's status only when the values, or the
// generation it applied, changed.
type workAgent struct {
	c    client.Client
	mu   sync.Mutex
	last map[string]map[string]string
	gen  sync.Map
}

// report gives each ManifestWork the values of its spoke Application and returns the status
// writes made.
func (a *workAgent) report(ctx context.Context, spokes []*spokeApp) (int, error) {
	works, err := listWorks(ctx, a.c)
	if err != nil {
		return 0, err
	}
	var writes atomic.Int64
	err = parallel(len(works), func(k int) error {
		w := &works[k]
		i, ok := appIndex(w.Annotations[pullmodel.AnnotationHubAppName])
		if !ok || i >= len(spokes) {
			return nil
		}
		key := w.Namespace + "/" + w.Name
		fed, err := feedback(w, spokes[i].object())
		if err != nil {
			return err
		}
		a.mu.Lock()
		last := a.last[key]
		a.mu.Unlock()
		if g, ok := a.gen.Load(key); ok && g.(int64) == w.Generation && last != nil && maps.Equal(last, fed) {
			return nil
		}
		var fb []workv1.FeedbackValue
		for _, k := range slices.Sorted(maps.Keys(fed)) {
			fb = append(fb, workv1.FeedbackValue{Name: k, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(fed[k])}})
		}
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now(), ObservedGeneration: w.Generation}}
			w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application", Resource: "applications"}, StatusFeedbacks: workv1.StatusFeedbackResult{Values: fb},
				Conditions: []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.Now()}}}}
			err := a.c.Status().Update(ctx, w)
			if apierrors.IsConflict(err) {
				// The manager changed the ManifestWork meanwhile: the next round reads its rules.
				if gerr := a.c.Get(ctx, client.ObjectKeyFromObject(w), w); gerr != nil {
					return gerr
				}
			}
			return err
		}); err != nil {
			return err
		}
		a.mu.Lock()
		a.last[key] = fed
		a.mu.Unlock()
		a.gen.Store(key, w.Generation)
		writes.Add(1)
		return nil
	})
	return int(writes.Load()), err
}

// feedback evaluates a ManifestWork's feedback rules on a spoke Application, as OCM's work
// agent's status reader does.
func feedback(w *workv1.ManifestWork, spoke map[string]any) (map[string]string, error) {
	out := map[string]string{}
	for _, mc := range w.Spec.ManifestConfigs {
		if mc.ResourceIdentifier.Resource != "applications" {
			continue
		}
		for _, r := range mc.FeedbackRules {
			for _, p := range r.JsonPaths {
				j := jsonpath.New(p.Name).AllowMissingKeys(true)
				if err := j.Parse("{" + p.Path + "}"); err != nil {
					return nil, fmt.Errorf("rule %s: %w", p.Name, err)
				}
				res, err := j.FindResults(spoke)
				if err != nil {
					return nil, fmt.Errorf("rule %s: %w", p.Name, err)
				}
				if len(res) > 0 && len(res[0]) > 0 && res[0][0].Interface() != nil {
					out[p.Name] = fmt.Sprint(res[0][0].Interface())
				}
			}
		}
	}
	return out, nil
}

func listWorks(ctx context.Context, c client.Client) ([]workv1.ManifestWork, error) {
	works := &workv1.ManifestWorkList{}
	if err := c.List(ctx, works, client.HasLabels{pullmodel.LabelPull}); err != nil {
		return nil, err
	}
	return works.Items, nil
}

// waitWorks waits until every one of n ManifestWorks satisfies ok.
func waitWorks(ctx context.Context, c client.Client, n int, what string, ok func(*workv1.ManifestWork) bool) error {
	return waitFor(what, phaseTimeout, func() (bool, error) {
		works, err := listWorks(ctx, c)
		if err != nil {
			return false, err
		}
		good := 0
		for i := range works {
			if ok(&works[i]) {
				good++
			}
		}
		return good == n, nil
	})
}

// waitApps waits until every one of n hub Applications satisfies ok (with its index).
func waitApps(ctx context.Context, c client.Client, n int, what string, ok func(int, *unstructured.Unstructured) bool) error {
	return waitFor(what, phaseTimeout, func() (bool, error) {
		list := pullmodel.NewApplicationList()
		if err := c.List(ctx, list, client.InNamespace(argoNS)); err != nil {
			return false, err
		}
		good := 0
		for k := range list.Items {
			if i, found := appIndex(list.Items[k].GetName()); found && ok(i, &list.Items[k]) {
				good++
			}
		}
		return good == n, nil
	})
}

func hasCondition(a *unstructured.Unstructured, conditionType string) bool {
	for _, c := range pullmodel.Conditions(a) {
		if m, _ := c.(map[string]any); m["type"] == conditionType {
			return true
		}
	}
	return false
}

func appName(i int) string { return fmt.Sprintf("app-%05d", i) }

func appIndex(name string) (int, bool) {
	var i int
	_, err := fmt.Sscanf(name, "app-%05d", &i)
	return i, err == nil
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

func application(i, nClusters int, set *unstructured.Unstructured) *unstructured.Unstructured {
	app := pullmodel.NewApplication()
	app.SetNamespace(argoNS)
	app.SetName(appName(i))
	app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
	app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: fmt.Sprintf("cluster-%04d", i%nClusters), pullmodel.AnnotationSkipReconcile: "true"})
	app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: pullmodel.ArgoGroupVersion.String(), Kind: pullmodel.ApplicationSetGVK.Kind, Name: set.GetName(), UID: set.GetUID()}})
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
