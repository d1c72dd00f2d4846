package propagation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// projectOnCluster returns the spec of the AppProject the project's ManifestWork on cluster
// carries, or why there is none.
func projectOnCluster(ctx context.Context, cluster, project string) (map[string]any, string) {
	w := &workv1.ManifestWork{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: cluster, Name: propagation.ProjectWorkName(project)}, w); err != nil {
		return nil, err.Error()
	}
	if w.DeletionTimestamp != nil || len(w.Spec.Workload.Manifests) != 1 {
		return nil, fmt.Sprintf("deleting %v, %d manifests", w.DeletionTimestamp != nil, len(w.Spec.Workload.Manifests))
	}
	var m map[string]any
	if err := json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &m); err != nil {
		return nil, err.Error()
	}
	spec, _ := m["spec"].(map[string]any)
	return spec, ""
}

// TestTightenedProjectReachesClustersOfRefusedApplications: an Application delivered under a hub
// AppProject keeps running on its cluster when an edit of the project refuses it (its
// ManifestWork is kept as it was). The cluster's copy of the project must then carry the
// tightened spec, not stay in its looser form, for as long as the Application's ManifestWork
// is there; the project's ManifestWork goes with the last such ManifestWork.
func TestTightenedProjectReachesClustersOfRefusedApplications(t *testing.T) {
	const cluster, project = "tighten1", "tighten-project"
	ctx := context.Background()
	loose := map[string]any{"sourceRepos": []any{"https://git.example/*"}, "destinations": []any{map[string]any{"server": "*", "namespace": "*"}}}
	s.Create(t, pulltest.AppProject(pulltest.ArgoNS, project, loose))
	s.CreateCluster(t, cluster, true)
	s.Create(t, appIn("tightened", cluster, project))
	waitDelivered(t, "tightened", cluster)
	app := s.GetApp(t, "tightened")
	appWork := client.ObjectKey{Namespace: cluster, Name: pullmodel.WorkName(app.GetName(), string(app.GetUID()))}

	tight := []any{"https://git.example/other"}
	patch := fmt.Sprintf(`{"spec":{"sourceRepos":["%s"],"description":"tightened"}}`, tight[0])
	if err := s.Client.Patch(ctx, pulltest.AppProject(pulltest.ArgoNS, project, nil), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	waitRefusedIn(t, pulltest.ArgoNS, "tightened", propagation.ReasonProjectForbids)
	if !workExists(ctx, s.Client, appWork) {
		t.Fatal("the refused Application's ManifestWork was deleted; the docs promise it stays")
	}
	poll.UntilState(t, "the tightened AppProject in the cluster's project ManifestWork", 15*time.Second, func(ctx context.Context) (bool, string) {
		spec, why := projectOnCluster(ctx, cluster, project)
		if spec == nil {
			return false, why
		}
		return equality.Semantic.DeepEqual(spec["sourceRepos"], tight) && spec["description"] == "tightened", fmt.Sprint(spec)
	})

	// Deleted, the Application's ManifestWork goes, and with it the project's.
	if err := s.Client.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	s.WorkGone(t, "the deleted Application's ManifestWork gone", "tightened")
	poll.UntilState(t, "the project's ManifestWork gone with the last ManifestWork delivering under it", 15*time.Second, func(ctx context.Context) (bool, string) {
		return !workExists(ctx, s.Client, client.ObjectKey{Namespace: cluster, Name: propagation.ProjectWorkName(project)}), "still there"
	})
}

// deliveryMessage is the Application's delivery condition, "" without one.
func deliveryMessage(t *testing.T, name string) string {
	t.Helper()
	msg, _ := pullmodel.DeliveryCondition(s.GetApp(t, name))
	return msg
}

// hasNormalEvent reports whether a Normal Event with that reason and a message containing
// part regards the named object.
func hasNormalEvent(ctx context.Context, ns, name, reason, part string) (bool, string) {
	events := &eventsv1.EventList{}
	if err := s.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
		return false, err.Error()
	}
	for _, e := range events.Items {
		if e.Regarding.Name == name && e.Reason == reason && e.Type == corev1.EventTypeNormal && strings.Contains(e.Note, part) {
			return true, ""
		}
	}
	return false, "no Normal Event " + reason
}

// TestWaitingForProjectReplacesAnOldRefusal: an Application refused first (its AppProject is not
// on the hub), then authorized while its cluster's work agent has not applied the project yet,
// says that it waits for the project, naming the project's ManifestWork and the cluster, with a
// Normal Event, instead of keeping the old refusal; it is not delivered meanwhile, and once the
// work agent has applied the project the condition goes and the Application is delivered.
func TestWaitingForProjectReplacesAnOldRefusal(t *testing.T) {
	const cluster, project, name = "waiting1", "waiting-project", "waits-for-project"
	s.CreateCluster(t, cluster, true)
	s.Agent.SetDown(cluster, true)
	t.Cleanup(func() { s.Agent.SetDown(cluster, false) })
	s.Create(t, appIn(name, cluster, project))
	waitRefusedIn(t, pulltest.ArgoNS, name, propagation.ReasonProjectNotFound)

	s.Create(t, pulltest.AppProject(pulltest.ArgoNS, project, nil))
	workName := cluster + "/" + propagation.ProjectWorkName(project)
	poll.UntilState(t, "WaitingForProject on the Application", 15*time.Second, func(ctx context.Context) (bool, string) {
		msg := deliveryMessage(t, name)
		if !strings.HasPrefix(msg, propagation.ReasonWaitingForProject+": ") || !strings.Contains(msg, "ManifestWork "+workName) || !strings.Contains(msg, "cluster "+cluster) {
			return false, msg
		}
		return hasNormalEvent(ctx, pulltest.ArgoNS, name, propagation.ReasonWaitingForProject, workName)
	})
	// The pass that wrote the condition is the one that held the Application back.
	app := s.GetApp(t, name)
	if workExists(context.Background(), s.Client, client.ObjectKey{Namespace: cluster, Name: pullmodel.WorkName(name, string(app.GetUID()))}) {
		t.Fatal("the Application's ManifestWork exists while it waits for its project")
	}

	s.Agent.SetDown(cluster, false)
	waitDelivered(t, name, cluster)
}

// projectsIdle waits until the project controller has nothing queued and nothing in hand: what
// the events seen so far asked of it is done.
func projectsIdle(t *testing.T) {
	t.Helper()
	value := func(metric, label string) (float64, bool) {
		mfs, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		sum, found := 0.0, false
		for _, mf := range mfs {
			if mf.GetName() != metric {
				continue
			}
			// The queue's depth has a series per priority: all count.
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					if l.GetName() == label && l.GetValue() == "pullmodel-projects" {
						sum, found = sum+m.GetGauge().GetValue(), true
					}
				}
			}
		}
		return sum, found
	}
	poll.UntilState(t, "the project controller idle", 15*time.Second, func(context.Context) (bool, string) {
		depth, ok1 := value("workqueue_depth", "name")
		active, ok2 := value("controller_runtime_active_workers", "controller")
		return ok1 && ok2 && depth == 0 && active == 0, fmt.Sprintf("queued %v (%t), working %v (%t)", depth, ok1, active, ok2)
	})
}
