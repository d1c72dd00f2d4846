package report

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
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
	if s.Clusters != "4" || s.Synced != "2" || s.NotSynced != "2" || s.Healthy != "1" || s.InProgress != "2" || s.NotHealthy != "1" {
		t.Errorf("summary %+v", s)
	}
	var order []string
	for _, c := range got.ClusterConditions {
		order = append(order, c.Cluster)
	}
	if len(order) != 4 || order[0] != "c1" || order[3] != "c4" {
		t.Errorf("clusters %v, want sorted c1..c4 without the deleting one", order)
	}
	if c := got.ClusterConditions[3].Conditions; len(c) != 1 || c[0].Type != ConditionDeliveryError || c[0].Message != "no such namespace" {
		t.Errorf("c4 conditions %+v", c)
	}
}
