package report_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportv1alpha1 "github.com/argocd-agent-addon/argocd-agent-addon/apis/appsetreport/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/report"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// TestApplicationSetReport: the report of an ApplicationSet lists each cluster its
// Applications are delivered to, with sync and health from the ManifestWork feedback and a
// summary; it follows an Application leaving, costs no write when nothing changed, undoes
// another writer's edit, and goes with the ApplicationSet.
func TestApplicationSetReport(t *testing.T) {
	ctx := context.Background()
	s.CreateCluster(t, "rep1", true)
	s.CreateCluster(t, "rep2", true)
	set := s.NewAppSet(t, "rep-set")
	owner := []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: set.GetName(), UID: set.GetUID()}}
	var names []string
	for _, c := range []string{"rep1", "rep2"} {
		app := pulltest.NewApp("rep-set-"+c, c)
		app.SetOwnerReferences(owner)
		s.Create(t, app)
		names = append(names, app.GetName())
	}
	w1 := s.WaitWork(t, s.GetApp(t, names[0]), "rep1")
	w2 := s.WaitWork(t, s.GetApp(t, names[1]), "rep2")
	// rep1 runs the resource reporter, rep2 does not.
	listed := resourcelist.Encode([]resourcelist.Resource{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "guestbook", Name: "guestbook-ui"}})
	rep1Feedback := map[string]string{"syncStatus": "Synced", "healthStatus": "Healthy", "syncRevision": "abc", "resourceList": listed}
	s.SetFeedback(t, w1, rep1Feedback)
	s.SetFeedback(t, w2, map[string]string{"syncStatus": "OutOfSync", "healthStatus": "Progressing", "operationStatePhase": "Failed", "operationStateStartedAt": "2026-01-01T00:00:00Z", "operationStateMessage": "one or more objects failed to apply"})

	key := client.ObjectKey{Namespace: pulltest.ArgoNS, Name: set.GetName()}
	rep := &reportv1alpha1.MulticlusterApplicationSetReport{}
	poll.UntilState(t, "the report with both clusters", 10*time.Second, func(ctx context.Context) (bool, string) {
		if err := s.Client.Get(ctx, key, rep); err != nil {
			return false, err.Error()
		}
		sum := rep.Statuses.Summary
		cc := rep.Statuses.ClusterConditions
		return len(cc) == 2 && cc[1].HealthStatus == "Progressing" && sum.Clusters == "2" && sum.Synced == "1" && sum.NotSynced == "1" && sum.Healthy == "1" && sum.InProgress == "1" && sum.NotHealthy == "1", fmt.Sprintf("%+v", rep.Statuses)
	})
	cc := rep.Statuses.ClusterConditions
	if len(cc) != 2 || cc[0].Cluster != "rep1" || cc[1].Cluster != "rep2" || cc[0].SyncRevision != "abc" || cc[0].App != pulltest.ArgoNS+"/"+names[0] {
		t.Fatalf("cluster conditions %+v", cc)
	}
	if len(cc[1].Conditions) != 1 || cc[1].Conditions[0].Type != "SyncError" || cc[1].Conditions[0].Message != "one or more objects failed to apply" {
		t.Errorf("rep2's conditions %+v, want the failed sync's message", cc[1].Conditions)
	}
	if r := rep.Statuses.Resources; len(r) != 1 || r[0] != (reportv1alpha1.ResourceRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "guestbook", Name: "guestbook-ui"}) {
		t.Errorf("resources %+v, want rep1's Deployment", r)
	}
	if len(rep.OwnerReferences) != 1 || rep.OwnerReferences[0].UID != set.GetUID() {
		t.Errorf("report owners %v, want the ApplicationSet", rep.OwnerReferences)
	}

	// A ManifestWork written again with nothing the report reads changed (only its Applied
	// condition's time moved) wakes a rebuild that must find the report as it is. The counts
	// are taken once the report's writes have stopped for longer than a batch, so that neither
	// the tail of the work above nor a rebuild still pending escapes them.
	quiet := report.DefaultBatch + time.Second
	m := s.QuietWritesOf(t, "multiclusterapplicationsetreports", quiet)
	s.UpdateWorkStatus(t, w1, func(cur *workv1.ManifestWork) bool {
		if len(cur.Status.Conditions) == 0 {
			t.Fatalf("ManifestWork %s has no status conditions", cur.Name)
		}
		c := &cur.Status.Conditions[0]
		c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.Add(time.Second))
		return true
	})
	if m2 := s.QuietWritesOf(t, "multiclusterapplicationsetreports", quiet); m2 != m {
		t.Errorf("a ManifestWork written with nothing the report reads changed cost %d report writes, want 0", m2-m)
	}

	// Another writer's edit, with no ManifestWork changed, is undone.
	if err := s.Client.Get(ctx, key, rep); err != nil {
		t.Fatal(err)
	}
	rep.Statuses.Summary.Clusters = "99"
	rep.Statuses.ClusterConditions = rep.Statuses.ClusterConditions[:1]
	if err := s.Client.Update(ctx, rep); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "the edited report made again", 10*time.Second, func(ctx context.Context) (bool, string) {
		if err := s.Client.Get(ctx, key, rep); err != nil {
			return false, err.Error()
		}
		return rep.Statuses.Summary.Clusters == "2" && len(rep.Statuses.ClusterConditions) == 2, fmt.Sprintf("%+v", rep.Statuses)
	})

	if err := s.Client.Delete(ctx, s.GetApp(t, names[1])); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "the report with rep1 only", 10*time.Second, func(ctx context.Context) (bool, string) {
		if err := s.Client.Get(ctx, key, rep); err != nil {
			return false, err.Error()
		}
		return rep.Statuses.Summary.Clusters == "1" && len(rep.Statuses.ClusterConditions) == 1 && rep.Statuses.ClusterConditions[0].Cluster == "rep1", fmt.Sprintf("%+v", rep.Statuses)
	})

	if err := s.Client.Delete(ctx, set); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "the report gone with its ApplicationSet", 10*time.Second, func(ctx context.Context) (bool, string) {
		err := s.Client.Get(ctx, key, &reportv1alpha1.MulticlusterApplicationSetReport{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
