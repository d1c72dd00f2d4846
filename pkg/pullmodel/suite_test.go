package pullmodel_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// argoNS is the hub Argo CD namespace of the tests' Applications.
const argoNS = "argocd"

var (
	env *testenv.Env
	k8s client.Client
	// agent plays the clusters' work agents for the AppProjects the pull model delivers.
	agent *workAgent
)

// startManagerOn starts a manager built like the binary's (its cache, client and controller
// options, and Setup) against e, with edit applied to the options, and returns its stop.
func startManagerOn(e *testenv.Env, edit func(*manager.Options)) func() {
	opts := manager.DefaultOptions()
	opts.Fleet.ReloaderImage = "argocd-agent-addon:test"
	// The operator's allowed pull-model namespaces: the hub Argo CD namespace, a tenant's, and
	// a managed cluster's (which must still be refused).
	opts.PullModel.Policy.SourceNamespaces = []string{argoNS, tenantNS, agentSourceNS}
	// Short, so that the offline release is seen within a test.
	opts.PullModel.OfflineRelease = offlineRelease
	if edit != nil {
		edit(&opts)
	}
	stop, err := testenv.StartManager(e.Config, e.Client.Scheme(), opts)
	if err != nil {
		panic(err)
	}
	return stop
}

// offlineRelease is the tests' --pull-model-offline-release-after.
const offlineRelease = 3 * time.Second

// setAvailable writes a ManagedCluster's Available condition, as OCM's registration controller
// does from the cluster's lease.
func setAvailable(t *testing.T, name string, available bool) {
	t.Helper()
	ctx := context.Background()
	mc := &clusterv1.ManagedCluster{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		t.Fatal(err)
	}
	status := metav1.ConditionFalse
	if available {
		status = metav1.ConditionTrue
	}
	apimeta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: clusterv1.ManagedClusterConditionAvailable, Status: status, Reason: "Test", Message: "set by the test"})
	if err := k8s.Status().Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
}

// logs collects the manager's log lines for tests that check what it says.
var logs = &logBuffer{}

type logBuffer struct {
	mu   chan struct{}
	data strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	if os.Getenv("TEST_VERBOSE") != "" {
		_, _ = os.Stderr.Write(p)
	}
	return b.data.Write(p)
}

func (b *logBuffer) String() string {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.data.String()
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(0)
	}
	logs.mu = make(chan struct{}, 1)
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(io.Writer(logs))))
	var err error
	env, err = testenv.Start(testenv.Options{WithArgoCD: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argoNS}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := tenancySteps(context.Background(), k8s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agent = startWorkAgent(agentCtx, k8s)
	stop := startManagerOn(env, nil)
	code := m.Run()
	stop()
	stopAgent()
	_ = env.Stop()
	os.Exit(code)
}

// --- fixtures ---------------------------------------------------------------

// testSet is the ManagedClusterSet of the tests' clusters, bound to the hub Argo CD namespace.
const testSet = "pull-tests"

// tenancySteps are what a hub admin does before the pull model delivers anything: the hub
// Argo CD's default AppProject (argocd-server creates it on a real hub), and a
// ManagedClusterSet bound to the hub Argo CD namespace.
func tenancySteps(ctx context.Context, c client.Client) error {
	for _, o := range []client.Object{
		appProject(argoNS, "default", nil),
		&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: testSet}},
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: testSet}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: testSet}},
	} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// managedCluster is an accepted ManagedCluster in the tests' cluster set.
func managedCluster(name string) *clusterv1.ManagedCluster {
	return &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{clusterv1beta2.ClusterSetLabel: testSet}}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
}

// appProject returns a hub AppProject; spec nil permits every repository and destination.
func appProject(ns, name string, spec map[string]any) *unstructured.Unstructured {
	p := pullmodel.NewApplication()
	p.SetKind("AppProject")
	p.SetNamespace(ns)
	p.SetName(name)
	if spec == nil {
		spec = map[string]any{"sourceRepos": []any{"*"}, "destinations": []any{map[string]any{"server": "*", "namespace": "*"}}}
	}
	p.Object["spec"] = spec
	return p
}

// createCluster registers a ManagedCluster (accepted or not) in the tests' cluster set, and
// its hub namespace.
func createCluster(t *testing.T, name string, accepted bool) {
	t.Helper()
	createClusterInSet(t, name, accepted, testSet)
}

// createClusterInSet registers a ManagedCluster in a set, and its hub namespace.
func createClusterInSet(t *testing.T, name string, accepted bool, set string) {
	t.Helper()
	ctx := context.Background()
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{clusterv1beta2.ClusterSetLabel: set}}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: accepted}}
	if err := k8s.Create(ctx, mc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// newApp returns a hub Application marked for cluster, with skip-reconcile.
func newApp(name, cluster string) *unstructured.Unstructured {
	app := pullmodel.NewApplication()
	app.SetNamespace(argoNS)
	app.SetName(name)
	app.SetLabels(map[string]string{pullmodel.LabelPull: "true", "team": "blue"})
	app.SetAnnotations(map[string]string{
		pullmodel.AnnotationCluster:       cluster,
		pullmodel.AnnotationSkipReconcile: "true",
		"note":                            "kept",
	})
	app.Object["spec"] = map[string]any{
		"project": "default",
		"source":  map[string]any{"repoURL": "https://git.example/guestbook", "path": "guestbook", "targetRevision": "main"},
		"destination": map[string]any{
			"name":      "in-cluster-on-hub",
			"namespace": "guestbook",
		},
		"syncPolicy": map[string]any{"automated": map[string]any{"prune": true}},
	}
	return app
}

func create(t *testing.T, o client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), o); err != nil {
		t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

func getApp(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	app := pullmodel.NewApplication()
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: argoNS, Name: name}, app); err != nil {
		t.Fatalf("reading Application %s: %v", name, err)
	}
	return app
}

// eventually polls cond until it holds or timeout passes; cond's string says what it saw.
func eventually(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	poll.UntilState(t, what, timeout, cond)
}

// waitWork waits for the ManifestWork of app and returns it.
func waitWork(t *testing.T, app *unstructured.Unstructured, cluster string) *workv1.ManifestWork {
	t.Helper()
	w := &workv1.ManifestWork{}
	key := client.ObjectKey{Namespace: cluster, Name: pullmodel.WorkName(app.GetName(), string(app.GetUID()))}
	eventually(t, "ManifestWork "+key.String(), 15*time.Second, func(ctx context.Context) (bool, string) {
		err := k8s.Get(ctx, key, w)
		return err == nil, fmt.Sprint(err)
	})
	return w
}

// workGone waits until no ManifestWork of the pull model names the Application.
func workGone(t *testing.T, what, appName string) {
	t.Helper()
	eventually(t, what, 15*time.Second, func(ctx context.Context) (bool, string) {
		list := &workv1.ManifestWorkList{}
		if err := k8s.List(ctx, list, client.HasLabels{pullmodel.LabelPull}); err != nil {
			return false, err.Error()
		}
		var left []string
		for _, w := range list.Items {
			if w.Annotations[pullmodel.AnnotationHubAppName] == appName {
				left = append(left, w.Namespace+"/"+w.Name)
			}
		}
		return len(left) == 0, fmt.Sprint("left: ", left)
	})
}

// setFeedback writes the work agent's part: the ManifestWork's Applied condition and the
// spoke Application's fed-back fields. Like OCM's work agent, it reports only the fields the
// ManifestWork's feedback rules name (the others are dropped), and writes nothing when that
// changes nothing; it returns whether it wrote.
func setFeedback(t *testing.T, w *workv1.ManifestWork, values map[string]string) bool {
	t.Helper()
	return writeWorkStatus(t, w, values, metav1.ConditionTrue, "")
}

// writeWorkStatus is setFeedback with the manifest's Applied condition status and message.
func writeWorkStatus(t *testing.T, w *workv1.ManifestWork, values map[string]string, applied metav1.ConditionStatus, message string) bool {
	t.Helper()
	ctx := context.Background()
	cur := &workv1.ManifestWork{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatal(err)
	}
	ruled := map[string]bool{}
	for _, mc := range cur.Spec.ManifestConfigs {
		for _, r := range mc.FeedbackRules {
			for _, p := range r.JsonPaths {
				ruled[p.Name] = true
			}
		}
	}
	fb := []workv1.FeedbackValue{}
	for _, k := range sortedKeys(values) {
		if ruled[k] {
			fb = append(fb, workv1.FeedbackValue{Name: k, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(values[k])}})
		}
	}
	var app map[string]any
	_ = jsonUnmarshal(cur.Spec.Workload.Manifests[0].Raw, &app)
	meta := app["metadata"].(map[string]any)
	reason := "AppliedManifestComplete"
	if applied != metav1.ConditionTrue {
		reason = "AppliedManifestFailed"
	}
	manifests := []workv1.ManifestCondition{{
		ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application", Resource: "applications",
			Namespace: fmt.Sprint(meta["namespace"]), Name: fmt.Sprint(meta["name"])},
		StatusFeedbacks: workv1.StatusFeedbackResult{Values: fb},
		Conditions:      []metav1.Condition{{Type: workv1.ManifestApplied, Status: applied, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}},
	}}
	if len(cur.Status.ResourceStatus.Manifests) == 1 {
		have := cur.Status.ResourceStatus.Manifests[0]
		if c := apimeta.FindStatusCondition(have.Conditions, workv1.ManifestApplied); c != nil && c.Status == applied && c.Message == message &&
			equality.Semantic.DeepEqual(have.StatusFeedbacks.Values, fb) && cur.Status.Conditions != nil && cur.Status.Conditions[0].ObservedGeneration == cur.Generation {
			return false
		}
	}
	cur.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: applied, Reason: "AppliedManifestWorkComplete", ObservedGeneration: cur.Generation, LastTransitionTime: metav1.Now()}}
	cur.Status.ResourceStatus.Manifests = manifests
	if err := k8s.Status().Update(ctx, cur); err != nil {
		t.Fatalf("writing ManifestWork status: %v", err)
	}
	return true
}

func testenvWrites() (map[string]int, error) {
	return testenv.APIWrites(context.Background(), env.Config)
}

// appWrites returns the API server's count of writes to Applications so far.
func appWrites(t *testing.T) (apps, works int) {
	t.Helper()
	m, err := testenv.APIWrites(context.Background(), env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return m["applications"], m["manifestworks"]
}
