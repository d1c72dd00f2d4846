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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/jsonpath"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
)

const argoNS = "argocd"

func main() {
	clusters := flag.Int("clusters", 1000, "managed clusters")
	apps := flag.Int("apps", 10000, "Applications, spread evenly over the clusters")
	flag.DurationVar(&phaseTimeout, "timeout", 20*time.Minute, "how long each phase may take")
	appsets := flag.Int("appsets", 0, "ApplicationSets owning the Applications (round robin); default one per 100 Applications")
	idle := flag.Duration("idle", 5*time.Minute, "how long Argo CD's periodic refresh is simulated on every spoke once the fleet is synced; every write meanwhile is a write at rest")
	refresh := flag.Duration("refresh", 20*time.Second, "how often each spoke Argo CD refreshes each Application meanwhile (Argo CD's default is 120s; shorter packs more refreshes into the period)")
	results := benchkit.ResultsFlag()
	binary := flag.String("manager", "bin/argocd-agent-addon", "path of the manager binary")
	managerArgs = benchkit.ManagerArgsFlag("--pull-model-concurrency=16")
	flag.Parse()
	// envtest logs through controller-runtime; the benchmark reports its errors itself, and an
	// unset logger prints a stack trace into the results once a later run starts an API server.
	ctrllog.SetLogger(logr.Discard())
	if *appsets < 1 {
		*appsets = max(1, *apps/100)
	}
	out := benchkit.NewOutput()
	err := run(*clusters, *apps, *appsets, *idle, *refresh, *binary, out)
	if err != nil {
		out.Printf("error: %v\n", err)
	}
	if aerr := out.Append(*results, "pullmodel"); aerr != nil {
		fmt.Fprintln(os.Stderr, "pullmodel bench:", aerr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pullmodel bench:", err)
		os.Exit(1)
	}
}

// phaseTimeout bounds each phase's wait.
var phaseTimeout time.Duration

// managerArgs are extra flags for the manager under test.
var managerArgs *benchkit.Strings

// rollingSyncOperation is the sync request Argo CD's ApplicationSet RollingSync puts on an
// Application (v3.6 progressivesync.syncApplication).
const rollingSyncOperation = `{"operation":{"initiatedBy":{"username":"applicationset-controller","automated":true},` +
	`"info":[{"name":"Reason","value":"ApplicationSet RollingSync triggered a sync of this Application resource"}],` +
	`"sync":{"revision":"0123456789abcdef","prune":true,"syncOptions":["CreateNamespace=true"]},"retry":{"limit":5}}}`

// spokeApp is what the benchmark's spoke Argo CD shows of one Application.
type spokeApp struct {
	sync, health, reconciledAt     string
	opPhase, opStarted, opFinished string
	// ran is the sync request the spoke's last operation ran, as Argo CD keeps it in the
	// operation state: the one its ManifestWork handed it, with the name the pull model gave it.
	ran       map[string]any
	syncError bool
	resources []resourcelist.Resource
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
		st["operationState"] = map[string]any{"phase": s.opPhase, "startedAt": s.opStarted, "finishedAt": s.opFinished, "message": "successfully synced (all tasks run)", "operation": s.ran}
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
