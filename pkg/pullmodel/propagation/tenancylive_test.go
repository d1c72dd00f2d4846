package propagation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportv1alpha1 "github.com/argocd-agent-addon/argocd-agent-addon/apis/appsetreport/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// tenantSet is the tenant's ManagedClusterSet, bound to pulltest.TenantNS only.
const tenantSet = "tenant-a-clusters"

// tenantSetup makes a tenant namespace with its own set, binding and AppProject, and a cluster
// in that set (what a hub admin does for a tenant), once.
func tenantSetup(t *testing.T) {
	t.Helper()
	s.Ensure(t,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pulltest.TenantNS}},
		&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: tenantSet}},
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: pulltest.TenantNS, Name: tenantSet}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: tenantSet}},
		pulltest.AppProject(pulltest.ArgoNS, pulltest.TenantNS, map[string]any{
			"sourceNamespaces": []any{pulltest.TenantNS},
			"sourceRepos":      []any{"https://git.example/*"},
			"destinations":     []any{map[string]any{"server": pullmodel.InClusterServer, "namespace": "tenant-a-*"}},
		}),
	)
	s.CreateClusterInSet(t, "tenant-a-c1", true, tenantSet)
}

// tenantApp is a hub Application of the tenant's namespace, in the tenant's project.
func tenantApp(name, cluster string) *unstructured.Unstructured {
	app := pulltest.NewApp(name, cluster)
	app.SetNamespace(pulltest.TenantNS)
	_ = unstructured.SetNestedField(app.Object, pulltest.TenantNS, "spec", "project")
	_ = unstructured.SetNestedField(app.Object, "tenant-a-web", "spec", "destination", "namespace")
	return app
}

func getAppIn(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	app := pullmodel.NewApplication()
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, app); err != nil {
		t.Fatalf("reading Application %s/%s: %v", ns, name, err)
	}
	return app
}

// waitRefusedIn waits until the Application carries the delivery condition with reason, and the
// Warning Event of the same reason exists.
func waitRefusedIn(t *testing.T, ns, name, reason string) {
	t.Helper()
	poll.UntilState(t, fmt.Sprintf("%s/%s refused with %s", ns, name, reason), 15*time.Second, func(ctx context.Context) (bool, string) {
		app := pullmodel.NewApplication()
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, app); err != nil {
			return false, err.Error()
		}
		msg, _ := pullmodel.DeliveryCondition(app)
		if !strings.HasPrefix(msg, reason+": ") {
			return false, "condition: " + msg
		}
		return hasEvent(ctx, ns, name, reason)
	})
}

// worksOf lists the ManifestWorks naming a hub Application.
func worksOf(t *testing.T, ns, name string) []workv1.ManifestWork {
	t.Helper()
	list := &workv1.ManifestWorkList{}
	if err := s.Client.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var out []workv1.ManifestWork
	for _, w := range list.Items {
		if w.Annotations[pullmodel.AnnotationHubAppNamespace] == ns && w.Annotations[pullmodel.AnnotationHubAppName] == name {
			out = append(out, w)
		}
	}
	return out
}

// TestDeliveryIsAuthorized: an Application reaches a cluster only from a namespace the operator
// allowed, never from a managed cluster's namespace or as argocd-agent's copy, only to a
// cluster bound to its namespace, and only as its hub AppProject permits; each refusal is a
// condition and an Event, and nothing is written to the cluster.
func TestDeliveryIsAuthorized(t *testing.T) {
	ctx := context.Background()
	tenantSetup(t)
	s.CreateCluster(t, "pm-other", true) // in the set bound to the hub Argo CD namespace only
	s.CreateCluster(t, pulltest.AgentSourceNS, true)

	ok := tenantApp("tenant-web", "tenant-a-c1")
	s.Create(t, ok)
	ok = getAppIn(t, pulltest.TenantNS, ok.GetName())
	w := s.WaitWork(t, ok, "tenant-a-c1")
	spoke := payload(t, w)
	if spoke.GetNamespace() != pulltest.ArgoNS || spoke.GetName() != pulltest.TenantNS+"."+ok.GetName() {
		t.Errorf("the tenant's Application lands at %s/%s, want %s/%s.%s", spoke.GetNamespace(), spoke.GetName(), pulltest.ArgoNS, pulltest.TenantNS, ok.GetName())
	}

	cases := []struct {
		app    *unstructured.Unstructured
		reason string
	}{}
	add := func(app *unstructured.Unstructured, reason string) {
		cases = append(cases, struct {
			app    *unstructured.Unstructured
			reason string
		}{app, reason})
	}

	// Another tenant's cluster: bound to the hub Argo CD namespace, not to the tenant's.
	add(tenantApp("tenant-reach", "pm-other"), propagation.ReasonClusterNotBound)
	// A namespace the operator did not allow.
	other := pulltest.NewApp("stranger", "pm-other")
	other.SetNamespace("team-x")
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-x"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	add(other, propagation.ReasonNamespaceNotAllowed)
	// A managed cluster's namespace, where a principal keeps an autonomous agent's
	// Applications, targeting another cluster (allowed by the operator by mistake).
	if err := s.Client.Create(ctx, &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: pulltest.AgentSourceNS, Name: pulltest.ClusterSet}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: pulltest.ClusterSet}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	fromAgent := pulltest.NewApp("from-agent", "pm-other")
	fromAgent.SetNamespace(pulltest.AgentSourceNS)
	add(fromAgent, propagation.ReasonAgentNamespace)
	// argocd-agent's copy of an Application, wherever it is.
	copied := pulltest.NewApp("agent-copy", "pm-other")
	copied.SetAnnotations(mergeMap(copied.GetAnnotations(), map[string]string{propagation.AnnotationAgentSourceUID: "4f1c"}))
	add(copied, propagation.ReasonAgentCopy)
	// The project forbids the destination (the spoke Argo CD's own namespace) ...
	toArgo := tenantApp("tenant-to-argocd", "tenant-a-c1")
	_ = unstructured.SetNestedField(toArgo.Object, "argocd", "spec", "destination", "namespace")
	add(toArgo, propagation.ReasonProjectForbids)
	// ... or the repository ...
	repo := tenantApp("tenant-repo", "tenant-a-c1")
	_ = unstructured.SetNestedField(repo.Object, "https://evil.example/x", "spec", "source", "repoURL")
	add(repo, propagation.ReasonProjectForbids)
	// ... or does not list the namespace (the default project has no sourceNamespaces).
	defProject := tenantApp("tenant-default-project", "tenant-a-c1")
	_ = unstructured.SetNestedField(defProject.Object, "default", "spec", "project")
	add(defProject, propagation.ReasonProjectForbids)
	// A project that does not exist.
	noProject := tenantApp("tenant-no-project", "tenant-a-c1")
	_ = unstructured.SetNestedField(noProject.Object, "nowhere", "spec", "project")
	add(noProject, propagation.ReasonProjectNotFound)
	// A spoke namespace of the author's choosing.
	spokeNS := tenantApp("tenant-spoke-ns", "tenant-a-c1")
	spokeNS.SetAnnotations(mergeMap(spokeNS.GetAnnotations(), map[string]string{pullmodel.AnnotationAppNamespace: "kube-system"}))
	add(spokeNS, propagation.ReasonSpokeNamespaceNotAllowed)

	for _, c := range cases {
		if err := s.Client.Create(ctx, c.app); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		waitRefusedIn(t, c.app.GetNamespace(), c.app.GetName(), c.reason)
		if got := worksOf(t, c.app.GetNamespace(), c.app.GetName()); len(got) != 0 {
			t.Errorf("%s/%s refused (%s) but delivered: %s/%s", c.app.GetNamespace(), c.app.GetName(), c.reason, got[0].Namespace, got[0].Name)
		}
	}
}

// TestLostRightStopsUpdates: a binding deleted after delivery stops updates and says so; what
// was delivered stays; the binding back resumes them.
func TestLostRightStopsUpdates(t *testing.T) {
	ctx := context.Background()
	tenantSetup(t)
	s.CreateClusterInSet(t, "tenant-a-c2", true, "tenant-a-more")
	set := &clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a-more"}}
	bind := &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: pulltest.TenantNS, Name: "tenant-a-more"}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "tenant-a-more"}}
	for _, o := range []client.Object{set, bind} {
		if err := s.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	app := tenantApp("tenant-lost", "tenant-a-c2")
	s.Create(t, app)
	app = getAppIn(t, pulltest.TenantNS, app.GetName())
	w := s.WaitWork(t, app, "tenant-a-c2")

	if err := s.Client.Delete(ctx, bind); err != nil {
		t.Fatal(err)
	}
	waitRefusedIn(t, pulltest.TenantNS, app.GetName(), propagation.ReasonClusterNotBound)
	app = getAppIn(t, pulltest.TenantNS, app.GetName())
	_ = unstructured.SetNestedField(app.Object, "v2", "spec", "source", "targetRevision")
	if err := s.Client.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	// The revision change is refused too (the condition stays), and the work keeps v1.
	s.QuietWritesOf(t, "manifestworks", 2*time.Second)
	cur := &workv1.ManifestWork{}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatalf("the delivered ManifestWork is gone after the binding went: %v", err)
	}
	if strings.Contains(string(cur.Spec.Workload.Manifests[0].Raw), `"v2"`) {
		t.Error("an update reached the cluster after the binding was deleted")
	}

	bind.ResourceVersion = ""
	if err := s.Client.Create(ctx, bind); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "the update delivered once bound again", 15*time.Second, func(ctx context.Context) (bool, string) {
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
			return false, err.Error()
		}
		a := pullmodel.NewApplication()
		_ = s.Client.Get(ctx, client.ObjectKey{Namespace: pulltest.TenantNS, Name: app.GetName()}, a)
		msg, refused := pullmodel.DeliveryCondition(a)
		return strings.Contains(string(cur.Spec.Workload.Manifests[0].Raw), `"v2"`) && !refused, "condition: " + msg
	})
}

// TestForeignManifestWorksAreNeverTheManagers: a work agent may label and annotate any
// ManifestWork of its cluster namespace. Dressed as a pull-model ManifestWork of a hub
// Application that does not exist, one the manager did not write is neither deleted nor
// reported in an ApplicationSet's report; an older ManifestWork from before seals, of an
// Application still on the hub, is still recognised.
func TestForeignManifestWorksAreNeverTheManagers(t *testing.T) {
	ctx := context.Background()
	s.CreateCluster(t, "forge1", true)
	// Stands for a ManifestWork of another component in the cluster's namespace (OCM's addon
	// manager writes the agent's there).
	foreign := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: "forge1", Name: "addon-something-deploy-0"},
		Spec: workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"default"}}`)}}}}}}
	s.Create(t, foreign)

	set := s.NewAppSet(t, "forge-set")
	owned := pulltest.NewApp("forge-set-member", "forge1")
	owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: set.GetName(), UID: set.GetUID()}})
	s.Create(t, owned)
	s.WaitWork(t, s.GetApp(t, owned.GetName()), "forge1")

	// The work agent's edit: the pull label and the annotations of a pull-model ManifestWork
	// for a hub Application "ghost", in the other ApplicationSet's report.
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(foreign), foreign); err != nil {
		t.Fatal(err)
	}
	foreign.Labels = map[string]string{pullmodel.LabelPull: "true"}
	foreign.Annotations = map[string]string{
		pullmodel.AnnotationHubAppNamespace: pulltest.ArgoNS, pullmodel.AnnotationHubAppName: "ghost",
		pullmodel.AnnotationApplicationSet: pulltest.ArgoNS + "/" + set.GetName(),
	}
	if err := s.Client.Update(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	// A real Application "ghost" created afterwards is reconciled after the edit: by the time
	// its own ManifestWork exists, the manager has acted on the forged one.
	ghost := pulltest.NewApp("ghost", "forge1")
	s.Create(t, ghost)
	s.WaitWork(t, s.GetApp(t, "ghost"), "forge1")
	// And a report rebuilt after the edit: a second member.
	second := pulltest.NewApp("forge-set-member2", "forge1")
	second.SetOwnerReferences(owned.GetOwnerReferences())
	s.Create(t, second)
	rep := &reportv1alpha1.MulticlusterApplicationSetReport{}
	poll.UntilState(t, "the report with both real members", 15*time.Second, func(ctx context.Context) (bool, string) {
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: pulltest.ArgoNS, Name: set.GetName()}, rep); err != nil {
			return false, err.Error()
		}
		n := 0
		for _, c := range rep.Statuses.ClusterConditions {
			if strings.HasPrefix(c.App, pulltest.ArgoNS+"/forge-set-member") {
				n++
			}
		}
		return n == 2, fmt.Sprintf("%+v", rep.Statuses.ClusterConditions)
	})
	for _, c := range rep.Statuses.ClusterConditions {
		if c.App == pulltest.ArgoNS+"/ghost" {
			t.Errorf("the forged ManifestWork has a row in the report: %+v", c)
		}
	}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(foreign), &workv1.ManifestWork{}); err != nil {
		t.Fatalf("the manager deleted a ManifestWork it did not write: %v", err)
	}
	// The periodic sweep, with the manager's own key: the forged ManifestWork names an existing
	// Application but is not its work, and it is not sealed, so it stays.
	sealer := s.Sealer(t)
	if _, err := propagation.Sweep(ctx, sealer, s.Client, s.Client, s.Client); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(foreign), &workv1.ManifestWork{}); err != nil {
		t.Fatalf("the sweep deleted a ManifestWork the manager did not write: %v", err)
	}

	// An Application delivered before seals existed: its unsealed ManifestWork, at the place
	// only its own can have, is still its own, and goes when it goes.
	legacy := pulltest.NewApp("legacy", "forge1")
	legacy.SetNamespace("team-x") // refused now: not an allowed namespace
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-x"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	s.Create(t, legacy)
	legacy = getAppIn(t, "team-x", "legacy")
	built, err := propagation.Build(propagation.Input{App: legacy})
	if err != nil {
		t.Fatal(err)
	}
	s.Create(t, built)
	waitRefusedIn(t, "team-x", "legacy", propagation.ReasonNamespaceNotAllowed)
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(built), &workv1.ManifestWork{}); err != nil {
		t.Fatalf("a ManifestWork delivered before the upgrade went when its Application was refused: %v", err)
	}
	poll.UntilState(t, "the legacy ManifestWork sealed over what its Application says", 15*time.Second, func(ctx context.Context) (bool, string) {
		cur := &workv1.ManifestWork{}
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(built), cur); err != nil {
			return false, err.Error()
		}
		return cur.Annotations[seal.Annotation] != "" && cur.Generation == 1, fmt.Sprintf("annotations %v, generation %d", cur.Annotations, cur.Generation)
	})
	if err := s.Client.Delete(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "the legacy ManifestWork deleted with its Application", 15*time.Second, func(ctx context.Context) (bool, string) {
		err := s.Client.Get(ctx, client.ObjectKeyFromObject(built), &workv1.ManifestWork{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestSpokePlaces: two Applications never share a place on a cluster (an Application of the
// hub Argo CD namespace named like another namespace's), a ManifestWork delivered to another
// place before is never moved (moving deletes the workload), and a seal that no longer
// verifies (a lost sealing key, or a work agent's edit) does not stop the Application's own
// ManifestWork from being updated and sealed anew.
func TestSpokePlaces(t *testing.T) {
	ctx := context.Background()
	tenantSetup(t)
	const set = "shared-set"
	s.CreateClusterInSet(t, "shared1", true, set)
	for _, o := range []client.Object{
		&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: set}},
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: pulltest.ArgoNS, Name: set}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: set}},
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: pulltest.TenantNS, Name: set}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: set}},
	} {
		if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	// The admin's Application named like the tenant's place, delivered first.
	squat := pulltest.NewApp(pulltest.TenantNS+".web2", "shared1")
	s.Create(t, squat)
	s.WaitWork(t, s.GetApp(t, squat.GetName()), "shared1")
	web2 := tenantApp("web2", "shared1")
	s.Create(t, web2)
	waitRefusedIn(t, pulltest.TenantNS, "web2", propagation.ReasonSpokeNameTaken)
	if got := worksOf(t, pulltest.TenantNS, "web2"); len(got) != 0 {
		t.Errorf("a second Application delivered to the same place: %s", got[0].Name)
	}

	// A ManifestWork written before the spoke namespace was fixed: at another place.
	moved := pulltest.NewApp("moved", "shared1")
	s.Create(t, moved)
	moved = s.GetApp(t, "moved")
	w := s.WaitWork(t, moved, "shared1")
	old, err := propagation.Build(propagation.Input{App: moved, Spoke: types.NamespacedName{Namespace: "team-space", Name: "moved"}})
	if err != nil {
		t.Fatal(err)
	}
	cur := &workv1.ManifestWork{}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec = old.Spec
	if err := s.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	patchApp(t, "moved", `{"spec":{"source":{"targetRevision":"v2"}}}`)
	waitRefusedIn(t, pulltest.ArgoNS, "moved", propagation.ReasonSpokePlaceChanged)
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatal(err)
	}
	if at := pullmodel.SpokeApplicationOf(cur); at.Namespace != "team-space" || strings.Contains(string(cur.Spec.Workload.Manifests[0].Raw), `"v2"`) {
		t.Errorf("the ManifestWork was moved or updated: delivers %s", at)
	}

	// A seal that no longer verifies.
	ok := pulltest.NewApp("reseal", "shared1")
	s.Create(t, ok)
	ok = s.GetApp(t, "reseal")
	w = s.WaitWork(t, ok, "shared1")
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatal(err)
	}
	cur.Annotations[seal.Annotation] = "made-with-a-key-since-lost"
	if err := s.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	patchApp(t, "reseal", `{"spec":{"source":{"targetRevision":"v3"}}}`)
	poll.UntilState(t, "the update delivered and the ManifestWork sealed anew", 15*time.Second, func(ctx context.Context) (bool, string) {
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(cur.Spec.Workload.Manifests[0].Raw), `"v3"`) && cur.Annotations[seal.Annotation] != "made-with-a-key-since-lost",
			fmt.Sprintf("seal %q", cur.Annotations[seal.Annotation])
	})
}

// TestProjectIsDeliveredWithTheApplication: the hub AppProject an Application names goes to the
// cluster in a ManifestWork of its own, sealed, one per cluster and project (without its hub
// sourceNamespaces, orphaned so that the cluster never deletes it), and the Application's own
// ManifestWork carries the Application alone; a change of the hub project reaches the cluster.
// A project tightened so that it admits no Application of the cluster keeps its ManifestWork,
// with the tightened spec, while the refused Applications stay there as delivered.
// The default project, which every Argo CD has, is not delivered.
func TestProjectIsDeliveredWithTheApplication(t *testing.T) {
	tenantSetup(t)
	app := tenantApp("with-project", "tenant-a-c1")
	s.Create(t, app)
	app = getAppIn(t, pulltest.TenantNS, app.GetName())
	key := client.ObjectKey{Namespace: "tenant-a-c1", Name: propagation.ProjectWorkName(pulltest.TenantNS)}
	projectIn := func(ctx context.Context) (map[string]any, *workv1.ManifestWork, string) {
		w := &workv1.ManifestWork{}
		if err := s.Client.Get(ctx, key, w); err != nil {
			return nil, nil, err.Error()
		}
		if len(w.Spec.Workload.Manifests) != 1 {
			return nil, w, fmt.Sprintf("%d manifests", len(w.Spec.Workload.Manifests))
		}
		var p map[string]any
		if err := json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &p); err != nil {
			return nil, w, err.Error()
		}
		return p, w, ""
	}
	poll.UntilState(t, "the tenant's AppProject in its own ManifestWork", 10*time.Second, func(ctx context.Context) (bool, string) {
		p, w, why := projectIn(ctx)
		if p == nil {
			return false, why
		}
		meta, _ := p["metadata"].(map[string]any)
		spec, _ := p["spec"].(map[string]any)
		_, hasSourceNS := spec["sourceNamespaces"]
		orphaned := w.Spec.DeleteOption != nil && w.Spec.DeleteOption.SelectivelyOrphan != nil &&
			len(w.Spec.DeleteOption.SelectivelyOrphan.OrphaningRules) == 1 && w.Spec.DeleteOption.SelectivelyOrphan.OrphaningRules[0].Resource == "appprojects"
		return p["kind"] == "AppProject" && meta["name"] == pulltest.TenantNS && meta["namespace"] == pulltest.ArgoNS && !hasSourceNS && orphaned &&
				fmt.Sprint(spec["sourceRepos"]) == "[https://git.example/*]" && w.Labels[pullmodel.LabelProjectWork] == "true" &&
				w.Annotations[pullmodel.AnnotationHubProject] == pulltest.TenantNS && w.Annotations[seal.Annotation] != "",
			fmt.Sprintf("project %v, delete option %+v, labels %v, annotations %v", p, w.Spec.DeleteOption, w.Labels, w.Annotations)
	})
	if w := s.WaitWork(t, app, "tenant-a-c1"); len(w.Spec.Workload.Manifests) != 1 || w.Spec.DeleteOption != nil {
		t.Errorf("the Application's ManifestWork has %d manifests and delete option %+v; want the Application alone", len(w.Spec.Workload.Manifests), w.Spec.DeleteOption)
	}
	patch := []byte(`{"spec":{"sourceRepos":["https://git.example/*","https://charts.example/*"]}}`)
	hubProject := pulltest.AppProject(pulltest.ArgoNS, pulltest.TenantNS, nil)
	if err := s.Client.Patch(context.Background(), hubProject, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.Patch(context.Background(), hubProject, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"sourceRepos":["https://git.example/*"]}}`)))
	})
	poll.UntilState(t, "the hub project's change in its ManifestWork", 10*time.Second, func(ctx context.Context) (bool, string) {
		p, _, why := projectIn(ctx)
		spec, _ := p["spec"].(map[string]any)
		return fmt.Sprint(spec["sourceRepos"]) == "[https://git.example/* https://charts.example/*]", fmt.Sprint(p, why)
	})

	// The project tightened so that it refuses every Application of the cluster: the
	// Application stays as it was delivered, and so the cluster gets the tightened project.
	if err := s.Client.Patch(context.Background(), hubProject, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"sourceRepos":["https://other.example/*"]}}`))); err != nil {
		t.Fatal(err)
	}
	waitRefusedIn(t, pulltest.TenantNS, app.GetName(), propagation.ReasonProjectForbids)
	poll.UntilState(t, "the tightened project in its ManifestWork", 10*time.Second, func(ctx context.Context) (bool, string) {
		p, _, why := projectIn(ctx)
		spec, _ := p["spec"].(map[string]any)
		return fmt.Sprint(spec["sourceRepos"]) == "[https://other.example/*]", fmt.Sprint(p, why)
	})
	if w := s.WaitWork(t, app, "tenant-a-c1"); w.DeletionTimestamp != nil {
		t.Error("the refused Application's ManifestWork is being deleted")
	}

	// An Application of the default project carries no project, and none goes to its cluster.
	s.CreateCluster(t, "default-project1", true)
	plain := pulltest.NewApp("default-project", "default-project1")
	s.Create(t, plain)
	w := s.WaitWork(t, s.GetApp(t, plain.GetName()), "default-project1")
	if len(w.Spec.Workload.Manifests) != 1 || w.Spec.DeleteOption != nil {
		t.Errorf("default project delivered: %d manifests, delete option %+v", len(w.Spec.Workload.Manifests), w.Spec.DeleteOption)
	}
	list := &workv1.ManifestWorkList{}
	if err := s.Client.List(context.Background(), list, client.InNamespace("default-project1"), client.HasLabels{pullmodel.LabelProjectWork}); err != nil || len(list.Items) != 0 {
		t.Errorf("project ManifestWorks for the default project: %d (%v)", len(list.Items), err)
	}
}

// TestRefusedPathSealsOnlyWhatTheManagerDecided: a work agent edits a delivered ManifestWork
// (another place on the cluster in its spec, which the manager then refuses to move, and
// another namespace's ApplicationSet in its annotations). The refusal leaves the ManifestWork
// as the work agent left it, unsealed: it never becomes a row of that ApplicationSet's report.
func TestRefusedPathSealsOnlyWhatTheManagerDecided(t *testing.T) {
	ctx := context.Background()
	tenantSetup(t)
	s.CreateCluster(t, "oracle1", true)
	victim := s.NewAppSetIn(t, pulltest.TenantNS, "victim-set", pulltest.TenantNS)

	app := pulltest.NewApp("oracle", "oracle1")
	s.Create(t, app)
	app = s.GetApp(t, "oracle")
	w := s.WaitWork(t, app, "oracle1")

	// The work agent's edit: the payload at another place, and the other namespace's set.
	moved, err := propagation.Build(propagation.Input{App: app, Spoke: types.NamespacedName{Namespace: "elsewhere", Name: "oracle"}})
	if err != nil {
		t.Fatal(err)
	}
	cur := &workv1.ManifestWork{}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatal(err)
	}
	forgedSeal := cur.Annotations[seal.Annotation]
	cur.Spec = moved.Spec
	cur.Annotations[pullmodel.AnnotationApplicationSet] = pulltest.TenantNS + "/" + victim.GetName()
	if err := s.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	waitRefusedIn(t, pulltest.ArgoNS, "oracle", propagation.ReasonSpokePlaceChanged)

	// A real member of the set, made after the edit: once the report lists it, the report has
	// been rebuilt with the edited ManifestWork in view.
	member := tenantApp("victim-member", "tenant-a-c1")
	member.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: victim.GetName(), UID: victim.GetUID()}})
	s.Create(t, member)
	rep := &reportv1alpha1.MulticlusterApplicationSetReport{}
	poll.UntilState(t, "the victim set's report with its real member", 15*time.Second, func(ctx context.Context) (bool, string) {
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: pulltest.TenantNS, Name: victim.GetName()}, rep); err != nil {
			return false, err.Error()
		}
		for _, c := range rep.Statuses.ClusterConditions {
			if c.App == pulltest.TenantNS+"/victim-member" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", rep.Statuses.ClusterConditions)
	})
	touch(t, "oracle") // one more refused pass after the report was built
	waitRefusedIn(t, pulltest.ArgoNS, "oracle", propagation.ReasonSpokePlaceChanged)
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: pulltest.TenantNS, Name: victim.GetName()}, rep); err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Statuses.ClusterConditions {
		if c.App == pulltest.ArgoNS+"/oracle" || c.Cluster == "oracle1" {
			t.Errorf("the work agent's edit made a row in another namespace's report: %+v", c)
		}
	}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatal(err)
	}
	if got := cur.Annotations[seal.Annotation]; got != forgedSeal {
		t.Errorf("the refused path sealed the edited ManifestWork again: seal %q, was %q", got, forgedSeal)
	}

	// The work agent strips the seal too, so that the ManifestWork looks like one written
	// before seals existed: it is still not sealed over the other namespace's set.
	delete(cur.Annotations, seal.Annotation)
	if err := s.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	touch(t, "oracle")
	waitRefusedIn(t, pulltest.ArgoNS, "oracle", propagation.ReasonSpokePlaceChanged)
	s.QuietWritesOf(t, "manifestworks", 2*time.Second) // the passes after the edit; a seal would come within them
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
		t.Fatal(err)
	}
	if got, ok := cur.Annotations[seal.Annotation]; ok {
		t.Errorf("the refused path sealed a ManifestWork whose annotations name another namespace's ApplicationSet: seal %q", got)
	}
}

// TestOperationIsAuthorized: a sync operation naming a repository the AppProject does not
// permit, or carrying inline manifests, is refused with its reason and an Event, and nothing of
// it reaches the ManifestWork; the same Application without the operation is delivered again.
func TestOperationIsAuthorized(t *testing.T) {
	ctx := context.Background()
	tenantSetup(t)
	app := tenantApp("tenant-op", "tenant-a-c1")
	s.Create(t, app)
	app = getAppIn(t, pulltest.TenantNS, app.GetName())
	w := s.WaitWork(t, app, "tenant-a-c1")

	for _, tc := range []struct {
		name, op, reason, forbidden string
	}{
		{"a forbidden repository", `{"operation":{"sync":{"source":{"repoURL":"https://evil.example/x","path":"."}}}}`, propagation.ReasonProjectForbids, "evil.example"},
		{"a forbidden repository among sources", `{"operation":{"sync":{"sources":[{"repoURL":"https://git.example/a"},{"repoURL":"https://evil.example/y"}]}}}`, propagation.ReasonProjectForbids, "evil.example"},
		{"inline manifests", `{"operation":{"sync":{"source":{"repoURL":"https://git.example/guestbook"},"manifests":["{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"inline\"}}"]}}}`, propagation.ReasonOperationNotAllowed, "inline"},
	} {
		a := getAppIn(t, pulltest.TenantNS, app.GetName())
		if err := s.Client.Patch(ctx, a, client.RawPatch(types.MergePatchType, []byte(tc.op))); err != nil {
			t.Fatal(err)
		}
		waitRefusedIn(t, pulltest.TenantNS, app.GetName(), tc.reason)
		cur := &workv1.ManifestWork{}
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil {
			t.Fatal(err)
		}
		if raw := string(cur.Spec.Workload.Manifests[0].Raw); strings.Contains(raw, tc.forbidden) || strings.Contains(raw, `"operation"`) {
			t.Errorf("%s: the operation reached the ManifestWork: %s", tc.name, raw)
		}
		a = getAppIn(t, pulltest.TenantNS, app.GetName())
		if err := s.Client.Patch(ctx, a, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/operation"}]`))); err != nil {
			t.Fatal(err)
		}
		poll.UntilState(t, tc.name+": delivered again without the operation", 15*time.Second, func(ctx context.Context) (bool, string) {
			a := pullmodel.NewApplication()
			if err := s.Client.Get(ctx, client.ObjectKey{Namespace: pulltest.TenantNS, Name: app.GetName()}, a); err != nil {
				return false, err.Error()
			}
			msg, refused := pullmodel.DeliveryCondition(a)
			return !refused, msg
		})
	}
}
