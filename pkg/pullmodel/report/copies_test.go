package report_test

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	reportv1alpha1 "github.com/argocd-agent-addon/argocd-agent-addon/apis/appsetreport/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/report"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// TestRebuildingAReportCopiesNoManifestWork: a report is rebuilt at each change of any of its
// ApplicationSet's ManifestWorks, reading all of them. It copied each one from the cache every
// time, and decoded each one's feedback and resource list again: while an ApplicationSet
// rolled, most of what the pull model allocated. A rebuild with nothing changed since the last
// (the one each write of the report wakes) reads the ManifestWorks without copies and makes
// neither their rows nor the report again.
func TestRebuildingAReportCopiesNoManifestWork(t *testing.T) {
	// An API server of its own: the package's manager would rebuild the report too.
	const works, clusters = 200, 20
	namespaces := []string{pulltest.ArgoNS}
	for i := range clusters {
		namespaces = append(namespaces, fmt.Sprintf("cluster-%02d", i))
	}
	env, ctx := pulltest.StartOwnEnv(t, namespaces...)
	c := env.Client
	set := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"generators": []any{}, "template": map[string]any{
		"metadata": map[string]any{"name": "{{name}}"},
		"spec":     map[string]any{"project": "default", "destination": map[string]any{"server": pullmodel.InClusterServer}},
	}}}}
	set.SetGroupVersionKind(pullmodel.ApplicationSetGVK)
	set.SetNamespace(pulltest.ArgoNS)
	set.SetName("apps")
	if err := c.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	for i := range works {
		// The ManifestWork the manager writes for an Application of the set.
		app := pulltest.NewApp(fmt.Sprintf("app-%03d", i), fmt.Sprintf("cluster-%02d", i%clusters))
		app.SetUID(types.UID(fmt.Sprintf("uid-%03d", i)))
		app.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: pullmodel.ArgoGroupVersion.String(), Kind: pullmodel.ApplicationSetGVK.Kind, Name: set.GetName(), UID: set.GetUID()}})
		w, err := propagation.Build(propagation.Input{App: app})
		if err != nil {
			t.Fatal(err)
		}
		w.Annotations[seal.Annotation] = sealer.Sign(propagation.SealFields(w))
		if err := c.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		// The feedback OCM's work agent reports: the Application's state and its objects.
		name := app.GetName()
		objects := resourcelist.Encode([]resourcelist.Resource{
			{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "apps", Name: name},
			{Version: "v1", Kind: "Service", Namespace: "apps", Name: name},
			{Version: "v1", Kind: "ConfigMap", Namespace: "apps", Name: name + "-settings"},
		})
		var values []workv1.FeedbackValue
		for k, v := range map[string]string{propagation.FeedbackHealth: "Healthy", propagation.FeedbackSync: "Synced", propagation.FeedbackRevision: "0123456789abcdef", propagation.FeedbackResourceList: objects} {
			values = append(values, workv1.FeedbackValue{Name: k, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(v)}})
		}
		w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
			ResourceMeta:    workv1.ManifestResourceMeta{Group: pullmodel.ArgoGroupVersion.Group, Version: pullmodel.ArgoGroupVersion.Version, Kind: "Application", Resource: "applications", Namespace: pulltest.ArgoNS, Name: name},
			StatusFeedbacks: workv1.StatusFeedbackResult{Values: values},
			Conditions:      []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestComplete", Message: "Apply manifest complete", LastTransitionTime: metav1.Now()}},
		}}
		if err := c.Status().Update(ctx, w); err != nil {
			t.Fatal(err)
		}
	}

	cfg := pullmodelsetup.DefaultConfig()
	informers := pulltest.StartPullCache(ctx, t, env, cfg)
	poll.Until(t, "every ManifestWork in the cache", 10*time.Second, func() error {
		list := &workv1.ManifestWorkList{}
		if err := informers.List(ctx, list); err != nil || len(list.Items) != works {
			return fmt.Errorf("%d of %d (%v)", len(list.Items), works, err)
		}
		return nil
	})
	r := &report.Reconciler{Client: c, Cache: informers, Sealer: sealer}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: pulltest.ArgoNS, Name: set.GetName()}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the report in the cache", 10*time.Second, func() error {
		rep := &reportv1alpha1.MulticlusterApplicationSetReport{}
		if err := informers.Get(ctx, req.NamespacedName, rep); err != nil {
			return err
		}
		if n := len(rep.Statuses.ClusterConditions); n != works {
			return fmt.Errorf("%d rows, want %d", n, works)
		}
		return nil
	})

	allocated := pulltest.LeastAllocated(5, func() {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	})
	perWork := float64(allocated) / works
	t.Logf("a rebuild of a report of %d ManifestWorks, none changed, allocated %.0f bytes per ManifestWork", works, perWork)
	// About 450 bytes: the list of ManifestWorks read from the cache. Making the report again,
	// measuring and comparing it, took 4.5 KB more; making each row again 3.3 KB more again,
	// and a copy of each ManifestWork more again.
	if perWork > 1000 {
		t.Errorf("a rebuild with nothing changed allocated %.0f bytes per ManifestWork: it copies them, makes their rows again, or makes the report again", perWork)
	}
}
