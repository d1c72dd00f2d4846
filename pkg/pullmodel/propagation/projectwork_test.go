package propagation_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// appIn returns a hub Application of the hub Argo CD namespace for cluster that names project.
func appIn(name, cluster, project string) *unstructured.Unstructured {
	app := pulltest.NewApp(name, cluster)
	_ = unstructured.SetNestedField(app.Object, project, "spec", "project")
	return app
}

// workExists reports whether the ManifestWork at key exists.
func workExists(ctx context.Context, c client.Client, key client.ObjectKey) bool {
	return c.Get(ctx, key, &workv1.ManifestWork{}) == nil
}

// writeProjectFailure writes what a work agent that could not apply the AppProject of a project
// ManifestWork reports.
func writeProjectFailure(t *testing.T, key client.ObjectKey, message string) {
	t.Helper()
	ctx := context.Background()
	w := &workv1.ManifestWork{}
	if err := s.Client.Get(ctx, key, w); err != nil {
		t.Fatal(err)
	}
	ns, _, _ := unstructured.NestedString(payloadObject(t, w.Spec.Workload.Manifests[0].Raw), "metadata", "namespace")
	w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionFalse, Reason: "AppliedManifestWorkFailed", Message: "Failed to apply manifest work", ObservedGeneration: w.Generation, LastTransitionTime: metav1.Now()}}
	w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
		ResourceMeta: workv1.ManifestResourceMeta{Group: "argoproj.io", Version: "v1alpha1", Kind: "AppProject", Resource: "appprojects", Namespace: ns, Name: w.Annotations[pullmodel.AnnotationHubProject]},
		Conditions:   []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionFalse, Reason: "AppliedManifestFailed", Message: message, LastTransitionTime: metav1.Now()}},
	}}
	if err := s.Client.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
}

func payloadObject(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNewApplicationWaitsForItsProject: a new Application whose AppProject is not on its cluster
// yet is delivered only once the cluster's work agent has applied the project's ManifestWork,
// so that the cluster's Argo CD never sees it without its project. A work agent that cannot apply
// the project is shown on the Application (ProjectNotApplied); once it has, the Application is
// delivered. A later failure to apply an edit of the project shows as OCMApplyError.
func TestNewApplicationWaitsForItsProject(t *testing.T) {
	const cluster, project = "wait-project1", "wait-project"
	s.Create(t, pulltest.AppProject(pulltest.ArgoNS, project, nil))
	s.CreateCluster(t, cluster, true)
	s.Agent.SetDown(cluster, true)
	t.Cleanup(func() { s.Agent.SetDown(cluster, false) })
	s.Create(t, appIn("waits", cluster, project))
	app := s.GetApp(t, "waits")
	key := client.ObjectKey{Namespace: cluster, Name: propagation.ProjectWorkName(project)}
	appWork := client.ObjectKey{Namespace: cluster, Name: pullmodel.WorkName(app.GetName(), string(app.GetUID()))}
	poll.UntilState(t, "the project's ManifestWork", 10*time.Second, func(ctx context.Context) (bool, string) {
		return workExists(ctx, s.Client, key), "not yet"
	})
	// The pass that says the Application waits is the one that held it back.
	poll.UntilState(t, "WaitingForProject on the Application", 10*time.Second, func(ctx context.Context) (bool, string) {
		msg, _ := pullmodel.DeliveryCondition(s.GetApp(t, app.GetName()))
		return strings.HasPrefix(msg, propagation.ReasonWaitingForProject+": "), msg
	})
	if workExists(context.Background(), s.Client, appWork) {
		t.Fatal("the Application's ManifestWork was written before its project was applied")
	}

	writeProjectFailure(t, key, `appprojects.argoproj.io "wait-project" is forbidden: User "system:serviceaccount:open-cluster-management-agent:klusterlet-work-sa" cannot create resource "appprojects"`)
	waitRefusedIn(t, pulltest.ArgoNS, app.GetName(), propagation.ReasonProjectNotApplied)
	if workExists(context.Background(), s.Client, appWork) {
		t.Fatal("the Application's ManifestWork exists although its project could not be applied")
	}

	s.Agent.SetDown(cluster, false)
	waitDelivered(t, app.GetName(), cluster)

	// An edit of the project the work agent cannot apply: the delivered Application says so.
	s.Agent.SetDown(cluster, true)
	editProject(t, project, "cannot be applied")
	poll.UntilState(t, "the edit in the project's ManifestWork", 10*time.Second, func(ctx context.Context) (bool, string) {
		ok, why := projectEverywhere(ctx, []string{cluster}, project, "cannot be applied")
		return ok, why
	})
	writeProjectFailure(t, key, "the AppProject admission webhook denied the request")
	applyError := func(ctx context.Context) string {
		for _, c := range pullmodel.Conditions(s.GetApp(t, app.GetName())) {
			if m, _ := c.(map[string]any); m["type"] == pullmodel.ConditionApplyError {
				return fmt.Sprint(m["message"])
			}
		}
		return ""
	}
	poll.UntilState(t, "OCMApplyError on the Application", 10*time.Second, func(ctx context.Context) (bool, string) {
		msg := applyError(ctx)
		return strings.Contains(msg, "its AppProject "+project+": the AppProject admission webhook denied the request"), msg
	})
	s.Agent.SetDown(cluster, false)
	poll.UntilState(t, "OCMApplyError gone once the work agent applied it", 10*time.Second, func(ctx context.Context) (bool, string) {
		msg := applyError(ctx)
		return msg == "", msg
	})
}

// TestLastApplicationRemovesProjectWork: the ManifestWork of an AppProject on a cluster stays
// while any Application of that cluster naming the project is delivered, and goes with the last
// one, whether it is deleted, moved to another project or unmarked. The AppProject stays on the
// cluster as it was: the work agent, applying under OCM's ownership rules, never deletes it.
func TestLastApplicationRemovesProjectWork(t *testing.T) {
	const cluster, project = "last-project1", "last-project"
	s.Create(t, pulltest.AppProject(pulltest.ArgoNS, project, nil))
	s.CreateCluster(t, cluster, true)
	// This cluster's work agent applies the AppProjects too.
	s.Agent.SetDown(cluster, true)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	spoke := pulltest.StartWorkAgent(ctx, s.Client, cluster)
	for _, n := range []string{"last-a", "last-b", "last-c"} {
		s.Create(t, appIn(n, cluster, project))
	}
	for _, n := range []string{"last-a", "last-b", "last-c"} {
		s.WaitWork(t, s.GetApp(t, n), cluster)
	}
	key := client.ObjectKey{Namespace: cluster, Name: propagation.ProjectWorkName(project)}
	onCluster := pullmodel.NewApplication()
	onCluster.SetKind("AppProject")
	poll.UntilState(t, "the AppProject on the cluster", 10*time.Second, func(ctx context.Context) (bool, string) {
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: pulltest.SpokeNamespace(cluster, pulltest.ArgoNS), Name: project}, onCluster)
		return err == nil, fmt.Sprint(err)
	})
	uid := onCluster.GetUID()

	a := s.GetApp(t, "last-a")
	if err := s.Client.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	s.WorkGone(t, "last-a's ManifestWork gone", "last-a")
	b := s.GetApp(t, "last-b")
	if err := s.Client.Patch(context.Background(), b, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"project":"default"}}`))); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "last-b delivered under the default project", 10*time.Second, func(ctx context.Context) (bool, string) {
		w := s.WaitWork(t, b, cluster)
		return payloadProjectOf(t, w) == "default", payloadProjectOf(t, w)
	})
	// An edit made after last-b moved reaches the cluster only through a pass that saw the move
	// and kept the project's ManifestWork for last-c.
	editProject(t, project, "after last-b moved")
	poll.UntilState(t, "the project's ManifestWork kept, and current, while last-c still names the project", 10*time.Second, func(ctx context.Context) (bool, string) {
		return projectEverywhere(ctx, []string{cluster}, project, "after last-b moved")
	})

	c := s.GetApp(t, "last-c")
	if err := s.Client.Patch(context.Background(), c, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/labels/apps.open-cluster-management.io~1pull-to-ocm-managed-cluster"}]`))); err != nil {
		t.Fatal(err)
	}
	s.WorkGone(t, "last-c's ManifestWork gone", "last-c")
	poll.UntilState(t, "the project's ManifestWork gone with the last Application naming it", 10*time.Second, func(ctx context.Context) (bool, string) {
		return !workExists(ctx, s.Client, key), "still there"
	})
	time.Sleep(time.Second) // the work agent's rounds after the deletion
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: pulltest.SpokeNamespace(cluster, pulltest.ArgoNS), Name: project}, onCluster); err != nil || onCluster.GetUID() != uid || onCluster.GetDeletionTimestamp() != nil {
		t.Errorf("the AppProject on the cluster after its ManifestWork went: %v, UID %s (was %s); want it kept", err, onCluster.GetUID(), uid)
	}
	if d := spoke.Deletions(); len(d) > 0 {
		t.Errorf("the work agent deleted %v", d)
	}
}

func payloadProjectOf(t *testing.T, w *workv1.ManifestWork) string {
	t.Helper()
	p, _, _ := unstructured.NestedString(payload(t, w).Object, "spec", "project")
	return p
}

// TestProjectWorkFollowsTenancy: an Application its author may not deliver brings its AppProject
// to no cluster. A tenant's Application naming a project that does not admit the tenant's
// namespace, or naming its own project for a cluster not bound to its namespace, is refused and
// makes no project ManifestWork there; an authorized Application for that cluster does.
func TestProjectWorkFollowsTenancy(t *testing.T) {
	tenantSetup(t)
	const argoOnly = "tenancy-argo-only"
	s.Create(t, pulltest.AppProject(pulltest.ArgoNS, argoOnly, nil))
	s.CreateCluster(t, "pt-unbound", true) // in the set bound to the hub Argo CD namespace only

	foreign := tenantApp("names-argo-project", "tenant-a-c1")
	_ = unstructured.SetNestedField(foreign.Object, argoOnly, "spec", "project")
	s.Create(t, foreign)
	unbound := tenantApp("unbound-cluster", "pt-unbound")
	s.Create(t, unbound)
	waitRefusedIn(t, pulltest.TenantNS, foreign.GetName(), propagation.ReasonProjectForbids)
	waitRefusedIn(t, pulltest.TenantNS, unbound.GetName(), propagation.ReasonClusterNotBound)
	projectsIdle(t)
	if workExists(context.Background(), s.Client, client.ObjectKey{Namespace: "tenant-a-c1", Name: propagation.ProjectWorkName(argoOnly)}) ||
		workExists(context.Background(), s.Client, client.ObjectKey{Namespace: "pt-unbound", Name: propagation.ProjectWorkName(pulltest.TenantNS)}) {
		t.Fatal("a refused Application brought its AppProject to a cluster")
	}

	s.Create(t, appIn("argo-project-app", "pt-unbound", argoOnly))
	waitDelivered(t, "argo-project-app", "pt-unbound")
	if !workExists(context.Background(), s.Client, client.ObjectKey{Namespace: "pt-unbound", Name: propagation.ProjectWorkName(argoOnly)}) {
		t.Error("no ManifestWork for the project of an authorized Application")
	}
	if workExists(context.Background(), s.Client, client.ObjectKey{Namespace: "pt-unbound", Name: propagation.ProjectWorkName(pulltest.TenantNS)}) {
		t.Error("the tenant's project reached a cluster not bound to the tenant")
	}
}

// TestUpgradeFromProjectCopiesKeepsTheSpokeProject: a hub whose ManifestWorks were written before
// AppProjects had ManifestWorks of their own, each Application's carrying a copy of its project
// (orphaned), applied on the cluster. The manager moves the project into one ManifestWork for the
// cluster, and each Application's ManifestWork drops its copy once that one is applied. Meanwhile
// the work agent, applying under OCM's ownership rules, never deletes the AppProject on the
// cluster (it keeps its UID, and is seen there at every poll), and every ManifestWork that carries
// the project orphans it. An edit of the project then reaches the cluster through its own
// ManifestWork.
func TestUpgradeFromProjectCopiesKeepsTheSpokeProject(t *testing.T) {
	// An API server of its own: the old ManifestWorks must be on the hub before a manager starts.
	e := testenv.StartForTest(t, testenv.Options{WithArgoCD: true})
	c := e.Client
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const cluster, project, apps = "upgrade1", "upgrade-project", 5
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pulltest.ArgoNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cluster}},
		pulltest.ManagedCluster(cluster),
		pulltest.AppProject(pulltest.ArgoNS, project, nil),
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := pulltest.TenancySteps(ctx, c); err != nil {
		t.Fatal(err)
	}
	// The old manager's sealing key, and its ManifestWorks.
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg := pullmodelsetup.DefaultConfig()
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.SealSecret.Namespace, Name: cfg.SealSecret.Name}, Data: map[string][]byte{"key": key}}); err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	hubProject := pulltest.AppProject(pulltest.ArgoNS, project, nil)
	if err := c.Get(ctx, client.ObjectKeyFromObject(hubProject), hubProject); err != nil {
		t.Fatal(err)
	}
	for i := range apps {
		app := appIn(fmt.Sprintf("upgrade-%d", i), cluster, project)
		if err := c.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
		w, err := propagation.Build(propagation.Input{App: app, ProjectCopy: hubProject})
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Spec.Workload.Manifests) != 2 || w.Spec.DeleteOption == nil || w.Spec.DeleteOption.SelectivelyOrphan == nil {
			t.Fatalf("the old shape: the Application and its orphaned AppProject; got %d manifests, delete option %+v", len(w.Spec.Workload.Manifests), w.Spec.DeleteOption)
		}
		w.Annotations[seal.Annotation] = sealer.Sign(propagation.SealFields(w))
		if err := c.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	spoke := pulltest.StartWorkAgent(ctx, c, cluster)
	onCluster := pullmodel.NewApplication()
	onCluster.SetKind("AppProject")
	spokeKey := client.ObjectKey{Namespace: pulltest.SpokeNamespace(cluster, pulltest.ArgoNS), Name: project}
	poll.UntilState(t, "the AppProject on the cluster, from the old ManifestWorks", 10*time.Second, func(ctx context.Context) (bool, string) {
		err := c.Get(ctx, spokeKey, onCluster)
		return err == nil, fmt.Sprint(err)
	})
	uid := onCluster.GetUID()

	// From now on: every ManifestWork written that carries the project must orphan it, and the
	// project must be on the cluster, with its UID, at every look.
	var mu sync.Mutex
	var problems []string
	problem := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 10 {
			problems = append(problems, s)
		}
	}
	wc, err := client.NewWithWatch(e.Config, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := wc.Watch(ctx, &workv1.ManifestWorkList{}, client.InNamespace(cluster))
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	go func() {
		for ev := range watcher.ResultChan() {
			w, ok := ev.Object.(*workv1.ManifestWork)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			projects, _ := pulltest.ManifestKinds(w)
			for _, p := range projects {
				if pulltest.OwnedByTheWork(w, p) {
					problem(fmt.Sprintf("ManifestWork %s (resourceVersion %s) carries the AppProject without orphaning it", w.Name, w.ResourceVersion))
				}
			}
		}
	}()
	go func() {
		for ctx.Err() == nil {
			cur := pullmodel.NewApplication()
			cur.SetKind("AppProject")
			switch err := c.Get(ctx, spokeKey, cur); {
			case err != nil && ctx.Err() == nil:
				problem("the AppProject on the cluster: " + err.Error())
			case err == nil && (cur.GetUID() != uid || cur.GetDeletionTimestamp() != nil):
				problem(fmt.Sprintf("the AppProject on the cluster: UID %s (was %s), deletion %v", cur.GetUID(), uid, cur.GetDeletionTimestamp()))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	stop := pulltest.StartManager(e, nil)
	defer stop()
	projectKey := client.ObjectKey{Namespace: cluster, Name: propagation.ProjectWorkName(project)}
	poll.UntilState(t, "the project in its own ManifestWork, applied, and no Application's ManifestWork carrying a copy", time.Minute, func(ctx context.Context) (bool, string) {
		pw := &workv1.ManifestWork{}
		if err := c.Get(ctx, projectKey, pw); err != nil {
			return false, err.Error()
		}
		if !propagation.ProjectApplied(pw, pulltest.ArgoNS) {
			return false, "project ManifestWork not applied yet"
		}
		list := &workv1.ManifestWorkList{}
		if err := c.List(ctx, list, client.InNamespace(cluster), client.HasLabels{pullmodel.LabelPull}); err != nil {
			return false, err.Error()
		}
		copies := 0
		for _, w := range list.Items {
			if w.Annotations[pullmodel.AnnotationHubAppName] != "" && len(w.Spec.Workload.Manifests) != 1 {
				copies++
			}
		}
		return copies == 0 && len(list.Items) == apps+1, fmt.Sprintf("%d ManifestWorks, %d still carrying a copy", len(list.Items), copies)
	})

	patch := []byte(`{"spec":{"description":"after the upgrade"}}`)
	if err := c.Patch(ctx, pulltest.AppProject(pulltest.ArgoNS, project, nil), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "the edit on the cluster", 20*time.Second, func(ctx context.Context) (bool, string) {
		cur := pullmodel.NewApplication()
		cur.SetKind("AppProject")
		if err := c.Get(ctx, spokeKey, cur); err != nil {
			return false, err.Error()
		}
		d, _, _ := unstructured.NestedString(cur.Object, "spec", "description")
		return d == "after the upgrade", d
	})
	time.Sleep(500 * time.Millisecond)
	cancel()
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("during the upgrade:\n%s", strings.Join(problems, "\n"))
	}
	if d := spoke.Deletions(); len(d) > 0 {
		t.Errorf("the work agent deleted %v", d)
	}
	if err := c.Get(context.Background(), spokeKey, onCluster); err != nil || onCluster.GetUID() != uid {
		t.Errorf("the AppProject on the cluster after the upgrade: %v, UID %s (was %s)", err, onCluster.GetUID(), uid)
	}
}
