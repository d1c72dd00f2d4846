package pulltest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// WaitWork waits for the ManifestWork of app on cluster and returns it.
func (s *Suite) WaitWork(t testing.TB, app *unstructured.Unstructured, cluster string) *workv1.ManifestWork {
	t.Helper()
	s.need(t)
	w := &workv1.ManifestWork{}
	key := client.ObjectKey{Namespace: cluster, Name: pullmodel.WorkName(app.GetName(), string(app.GetUID()))}
	poll.UntilState(t, "ManifestWork "+key.String(), 15*time.Second, func(ctx context.Context) (bool, string) {
		err := s.Client.Get(ctx, key, w)
		return err == nil, fmt.Sprint(err)
	})
	return w
}

// WorkGone waits until no ManifestWork of the pull model names the Application.
func (s *Suite) WorkGone(t testing.TB, what, appName string) {
	t.Helper()
	s.need(t)
	poll.UntilState(t, what, 15*time.Second, func(ctx context.Context) (bool, string) {
		list := &workv1.ManifestWorkList{}
		if err := s.Client.List(ctx, list, client.HasLabels{pullmodel.LabelPull}); err != nil {
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

// SetFeedback writes the work agent's part: the ManifestWork's Applied condition and the
// spoke Application's fed-back fields. Like OCM's work agent, it reports only the fields the
// ManifestWork's feedback rules name (the others are dropped), and writes nothing when that
// changes nothing; it returns whether it wrote.
func (s *Suite) SetFeedback(t testing.TB, w *workv1.ManifestWork, values map[string]string) bool {
	t.Helper()
	return s.WriteWorkStatus(t, w, values, metav1.ConditionTrue, "")
}

// WriteWorkStatus is SetFeedback with the manifest's Applied condition status and message.
func (s *Suite) WriteWorkStatus(t testing.TB, w *workv1.ManifestWork, values map[string]string, applied metav1.ConditionStatus, message string) bool {
	t.Helper()
	return s.UpdateWorkStatus(t, w, func(cur *workv1.ManifestWork) bool {
		return workStatus(cur, values, applied, message)
	})
}

// UpdateWorkStatus reads w as stored, lets change edit it, and writes its status when change
// says it changed something; it returns whether it wrote.
func (s *Suite) UpdateWorkStatus(t testing.TB, w *workv1.ManifestWork, change func(cur *workv1.ManifestWork) bool) bool {
	t.Helper()
	s.need(t)
	cur := &workv1.ManifestWork{}
	if err := s.Client.Get(context.Background(), client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatal(err)
	}
	if !change(cur) {
		return false
	}
	if err := s.Client.Status().Update(context.Background(), cur); err != nil {
		t.Fatalf("writing ManifestWork status: %v", err)
	}
	return true
}

// workStatus sets cur's status as the work agent would report values and the Applied
// condition, and says whether that changes anything the agent reports.
func workStatus(cur *workv1.ManifestWork, values map[string]string, applied metav1.ConditionStatus, message string) bool {
	ruled := map[string]bool{}
	for _, mc := range cur.Spec.ManifestConfigs {
		for _, r := range mc.FeedbackRules {
			for _, p := range r.JsonPaths {
				ruled[p.Name] = true
			}
		}
	}
	fb := []workv1.FeedbackValue{}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if ruled[k] {
			fb = append(fb, workv1.FeedbackValue{Name: k, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(values[k])}})
		}
	}
	var app map[string]any
	_ = json.Unmarshal(cur.Spec.Workload.Manifests[0].Raw, &app)
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
	return true
}

// Writes returns the API server's count of writes so far, by resource; a subresource's are
// counted apart ("applications/status").
func (s *Suite) Writes(t testing.TB) map[string]int {
	t.Helper()
	s.need(t)
	m, err := testenv.APIWrites(context.Background(), s.Config)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// QuietWritesOf waits until the API server has taken no write of resource for quiet, and
// returns its count then: a test that counts the writes of one change must not also count the
// tail of the work before it. Other resources' writes do not hold the wait up.
func (s *Suite) QuietWritesOf(t testing.TB, resource string, quiet time.Duration) int {
	t.Helper()
	s.need(t)
	m, err := testenv.QuietWritesOf(context.Background(), s.Config, quiet, time.Minute, resource)
	if err != nil {
		t.Fatalf("%s: %v", resource, err)
	}
	return m[resource]
}

// QuietAppWrites is AppWrites once neither Applications nor ManifestWorks have been written
// for quiet: a late write of the change before the count lands in it instead of after it.
func (s *Suite) QuietAppWrites(t testing.TB, quiet time.Duration) (apps, works int) {
	t.Helper()
	s.need(t)
	m, err := testenv.QuietWritesOf(context.Background(), s.Config, quiet, time.Minute, "applications", "manifestworks")
	if err != nil {
		t.Fatal(err)
	}
	return m["applications"], m["manifestworks"]
}

// AppWrites returns the API server's count of writes to Applications and to ManifestWorks so
// far, their status apart.
func (s *Suite) AppWrites(t testing.TB) (apps, works int) {
	t.Helper()
	m := s.Writes(t)
	return m["applications"], m["manifestworks"]
}

// Deliver registers the accepted cluster, creates a NewApp of that name for it and waits for
// its ManifestWork, as most tests begin. It returns the Application as stored (its UID names
// the ManifestWork) and the ManifestWork.
func (s *Suite) Deliver(t testing.TB, name, cluster string) (*unstructured.Unstructured, *workv1.ManifestWork) {
	t.Helper()
	s.CreateCluster(t, cluster, true)
	s.Create(t, NewApp(name, cluster))
	app := s.GetApp(t, name)
	return app, s.WaitWork(t, app, cluster)
}
