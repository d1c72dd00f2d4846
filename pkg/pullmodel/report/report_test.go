package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"

	reportv1alpha1 "github.com/argocd-agent-addon/argocd-agent-addon/apis/appsetreport/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
)

func w(cluster string, fb map[string]string) workv1.ManifestWork {
	out := workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: "app-" + cluster,
		Annotations: map[string]string{pullmodel.AnnotationHubAppNamespace: "argocd", pullmodel.AnnotationHubAppName: "app-" + cluster}}}
	var vals []workv1.FeedbackValue
	for k, v := range fb {
		vals = append(vals, workv1.FeedbackValue{Name: k, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(v)}})
	}
	out.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Resource: "applications"}, StatusFeedbacks: workv1.StatusFeedbackResult{Values: vals}}}
	return out
}

func TestBuildSummary(t *testing.T) {
	deleting := w("c0", map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy"})
	deleting.DeletionTimestamp = &metav1.Time{}
	notApplied := w("c4", nil)
	notApplied.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionFalse, Message: "no such namespace"}}
	got := Build([]workv1.ManifestWork{
		w("c3", map[string]string{"syncStatus": "OutOfSync", "healthStatus": "Degraded"}),
		w("c1", map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy"}),
		w("c2", map[string]string{"syncStatus": "Synced", "healthStatus": "Progressing"}),
		deleting, notApplied,
	})
	s := got.Summary
	// As Red Hat ACM counts: Progressing is in progress and not healthy; c4, not reported, is
	// Unknown and not healthy.
	if s.Clusters != "4" || s.Synced != "2" || s.NotSynced != "2" || s.Healthy != "1" || s.InProgress != "1" || s.NotHealthy != "3" {
		t.Errorf("summary %+v", s)
	}
	var order []string
	for _, c := range got.ClusterConditions {
		order = append(order, c.Cluster)
	}
	if len(order) != 4 || order[0] != "c1" || order[3] != "c4" {
		t.Errorf("clusters %v, want sorted c1..c4 without the deleting one", order)
	}
	if c := got.ClusterConditions[3]; c.HealthStatus != "Unknown" || c.SyncStatus != "Unknown" {
		t.Errorf("c4, not reported: health %q sync %q, want Unknown", c.HealthStatus, c.SyncStatus)
	}
	if c := got.ClusterConditions[3].Conditions; len(c) != 1 || c[0].Type != ConditionDeliveryError || c[0].Message != "no such namespace" {
		t.Errorf("c4 conditions %+v", c)
	}
}

// TestReportStaysFarBelowEtcdsLimit: an ApplicationSet over 6,000 clusters, a few of them
// failing with long messages, makes a report whose cluster entries stay within EntryBudget (half
// of etcd's object limit), keeps every failing cluster, says how many it left out, and still
// counts every cluster in the summary.
func TestReportStaysFarBelowEtcdsLimit(t *testing.T) {
	const n = 6000
	works := make([]workv1.ManifestWork, 0, n)
	for i := range n {
		fb := map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy", "syncRevision": strings.Repeat("a", 40),
			"operationStatePhase": "Succeeded", "operationStateStartedAt": "2026-01-01T00:00:00Z"}
		if i%1000 == 7 {
			fb["operationStatePhase"] = "Failed"
			fb["operationStateMessage"] = strings.Repeat("one or more objects failed to apply ", 200)
			fb["healthStatus"] = "Degraded"
		}
		works = append(works, w(fmt.Sprintf("cluster-%05d", i), fb))
	}
	got := Build(works)
	raw, _ := json.Marshal(got)
	if len(raw) > EntryBudget+4096 || len(raw) > 1536*1024/2 {
		t.Errorf("statuses are %d bytes, over the %d byte budget", len(raw), EntryBudget)
	}
	if got.Summary.Clusters != "6000" || got.Summary.Healthy != "5994" {
		t.Errorf("summary %+v, want all 6000 clusters counted", got.Summary)
	}
	if got.OmittedClusters == 0 || got.OmittedClusters+len(got.ClusterConditions) != n {
		t.Errorf("%d entries and %d omitted, want a bounded list that says how many it left out", len(got.ClusterConditions), got.OmittedClusters)
	}
	failing := 0
	for i, c := range got.ClusterConditions {
		if c.HealthStatus == "Degraded" {
			failing++
			if len(c.Conditions) != 1 || len(c.Conditions[0].Message) > 512 {
				t.Errorf("%s: conditions not bounded: %d bytes", c.Cluster, len(c.Conditions[0].Message))
			}
		}
		if i > 0 && got.ClusterConditions[i-1].Cluster > c.Cluster {
			t.Fatalf("entries not sorted by cluster at %d", i)
		}
	}
	if failing != 6 {
		t.Errorf("%d failing clusters kept, want all 6", failing)
	}
	t.Logf("6,000 clusters: %d entries, %d omitted, %d bytes", len(got.ClusterConditions), got.OmittedClusters, len(raw))
}

func TestReportLabels(t *testing.T) {
	if l := reportLabels("openshift-gitops", "guestbook"); l[LabelHostingApplicationSet] != "openshift-gitops.guestbook" || l[pullmodel.LabelApplicationSet] != "true" {
		t.Errorf("labels %v, want ACM's hosting-applicationset label", l)
	}
	// Cut to 63 characters, as ACM does; left off if the cut value ends in a separator.
	if l := reportLabels("argocd", strings.Repeat("x", 70)); l[LabelHostingApplicationSet] != "argocd."+strings.Repeat("x", 56) {
		t.Errorf("an over-long name: label %v, want the first 63 characters", l)
	}
	if l := reportLabels("argocd", strings.Repeat("x", 55)+"-y"); l[LabelHostingApplicationSet] != "" {
		t.Errorf("a cut value ending in '-' was set: %v", l)
	}
}

// TestReportListsTheObjectsTheClustersReport: the resource lists fed back by the clusters'
// reporters make one sorted list of distinct objects; a malformed list is named in its
// cluster's entry and adds nothing; a cluster without a reporter adds nothing.
func TestReportListsTheObjectsTheClustersReport(t *testing.T) {
	list := func(items ...[5]string) string {
		var rs []resourcelist.Resource
		for _, it := range items {
			rs = append(rs, resourcelist.Resource{Group: it[0], Version: it[1], Kind: it[2], Namespace: it[3], Name: it[4]})
		}
		return resourcelist.Encode(rs)
	}
	deploy := [5]string{"apps", "v1", "Deployment", "guestbook", "guestbook-ui"}
	svc := [5]string{"", "v1", "Service", "guestbook", "guestbook-ui"}
	extra := [5]string{"", "v1", "ConfigMap", "guestbook", "only-on-c2"}
	got := Build([]workv1.ManifestWork{
		w("c1", map[string]string{"syncStatus": "Synced", "resourceList": list(deploy, svc)}),
		w("c2", map[string]string{"syncStatus": "Synced", "resourceList": list(svc, deploy, extra)}),
		w("c3", map[string]string{"syncStatus": "Synced", "resourceList": `[{"kind":"Secret","name":"stolen"}]`}),
		w("c4", map[string]string{"syncStatus": "Synced"}),
	})
	want := []reportv1alpha1.ResourceRef{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "guestbook", Name: "guestbook-ui"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "guestbook", Name: "only-on-c2"},
		{APIVersion: "v1", Kind: "Service", Namespace: "guestbook", Name: "guestbook-ui"},
	}
	if fmt.Sprint(got.Resources) != fmt.Sprint(want) || got.OmittedResources != 0 {
		t.Errorf("resources %v (omitted %d), want %v", got.Resources, got.OmittedResources, want)
	}
	var c3 []reportv1alpha1.Condition
	for _, c := range got.ClusterConditions {
		if c.Cluster == "c3" {
			c3 = c.Conditions
		}
		if c.Cluster == "c4" && len(c.Conditions) != 0 {
			t.Errorf("c4, without a reporter: conditions %+v", c.Conditions)
		}
	}
	if len(c3) != 1 || c3[0].Type != ConditionResourceListError {
		t.Errorf("c3, malformed list: conditions %+v", c3)
	}
}

// TestResourceListStaysWithinItsBudget: 500 clusters each reporting objects of their own (the
// worst case: no two alike) keep the list within ResourceBudget and count the rest.
func TestResourceListStaysWithinItsBudget(t *testing.T) {
	var works []workv1.ManifestWork
	for i := range 500 {
		var rs []resourcelist.Resource
		for j := range 20 {
			rs = append(rs, resourcelist.Resource{Version: "v1", Kind: "ConfigMap", Namespace: fmt.Sprintf("ns-%03d", i), Name: fmt.Sprintf("config-%02d", j)})
		}
		works = append(works, w(fmt.Sprintf("c%03d", i), map[string]string{"resourceList": resourcelist.Encode(rs)}))
	}
	got := Build(works)
	raw, _ := json.Marshal(got.Resources)
	if len(raw) > ResourceBudget || len(got.Resources)+got.OmittedResources != 10000 || got.OmittedResources == 0 {
		t.Fatalf("%d objects in %d bytes, %d omitted", len(got.Resources), len(raw), got.OmittedResources)
	}
	t.Logf("%d of 10,000 objects listed in %d bytes", len(got.Resources), len(raw))
}
