package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
)

// Names of the pull-model scenario.
const (
	pullPlacement = "guestbook-pull"
	pullAppSet    = "guestbook-pull"
	pullNS        = "guestbook-pull" // the workload's namespace on each cluster
	// tenantNS is a second tenant's hub namespace, allowed for the pull model (the manager's
	// --pull-model-namespaces) and bound to a set of its own.
	tenantNS = "tenant-b"
	// otherArgoNS is the namespace of the second cluster's own Argo CD: OpenShift GitOps's, set
	// by the hub admin with a ManagedCluster label, beside the first cluster's plain "argocd".
	otherArgoNS = "openshift-gitops"
)

// testPullModelApplicationSet runs the basic pull model on the real fleet: Argo CD's
// applicationset-controller on the hub turns an ApplicationSet with a clusterDecisionResource
// generator (the ocm-placement-generator ConfigMap) over a Placement of both clusters into one
// hub Application per cluster; the manager delivers each as a ManifestWork; OCM's work agent
// applies it on the cluster, whose own Argo CD syncs the guestbook from the loopback Git
// repository; its sync and health come back through ManifestWork feedback and read Synced
// Healthy on the hub, and the ApplicationSet report shows both clusters. The ApplicationSet
// rolls out with RollingSync, one cluster per step: the sync requests it puts on the hub
// Applications reach the clusters, and the fed-back status moves its steps forward. Taking a cluster out
// of the Placement removes its Application, ManifestWork and workload.
func testPullModelApplicationSet(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	s.labelClusters(t)
	clusters := s.f.Clusters()
	s.stockWorkAgentRights(t, clusters)
	// A mixed fleet: the second cluster's Argo CD serves another namespace than the first's.
	s.moveSpokeArgoCD(t, clusters[1], otherArgoNS)

	repo, sha := s.gitRepo(t, "git-pull", "guestbook", fleet.GuestbookFiles(1, s.guestbookImg1))

	s.startPullModelArgoCD(t, ctx, clusters, map[string]string{"applicationsetcontroller.enable.progressive.syncs": "true"})

	// The hub side a user sets up: a binding of the fleet's cluster set into Argo CD's
	// namespace, a Placement there, an ArgoCDClusterRegistration of its clusters (the Argo CD
	// cluster secrets the generator matches decisions against) and the ApplicationSet. The
	// chart made the ocm-placement-generator ConfigMap and the generator's read access.
	objs := []client.Object{
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.ArgoCDNamespace, Name: "fleet"}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "fleet"}},
		&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.ArgoCDNamespace, Name: pullPlacement}, Spec: clusterv1beta1.PlacementSpec{Predicates: placementPredicates(clusters)}},
		&v1alpha1.ArgoCDClusterRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.ArgoCDNamespace, Name: pullPlacement},
			Spec: v1alpha1.ArgoCDClusterRegistrationSpec{PlacementRef: v1alpha1.PlacementReference{Name: pullPlacement}}},
	}
	appSet := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(fmt.Appendf(nil, `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: %s, namespace: %s}
spec:
  generators:
  - clusterDecisionResource:
      configMapRef: ocm-placement-generator
      labelSelector:
        matchLabels:
          cluster.open-cluster-management.io/placement: %s
      requeueAfterSeconds: 10
  strategy:
    type: RollingSync
    rollingSync:
      steps:
      - matchExpressions: [{key: rollout-cluster, operator: In, values: [cluster1]}]
      - matchExpressions: [{key: rollout-cluster, operator: In, values: [cluster2]}]
  template:
    metadata:
      name: '{{name}}-guestbook'
      labels:
        apps.open-cluster-management.io/pull-to-ocm-managed-cluster: 'true'
        rollout-cluster: '{{name}}'
      annotations:
        argocd.argoproj.io/skip-reconcile: 'true'
        apps.open-cluster-management.io/ocm-managed-cluster: '{{name}}'
      finalizers: [resources-finalizer.argocd.argoproj.io]
    spec:
      project: default
      source: {repoURL: %q, path: guestbook, targetRevision: main}
      destination: {server: https://kubernetes.default.svc, namespace: %s}
      syncPolicy:
        automated: {prune: true}
        syncOptions: [CreateNamespace=true]
`, pullAppSet, fleet.ArgoCDNamespace, pullPlacement, repo.URL, pullNS), &appSet.Object); err != nil {
		t.Fatal(err)
	}
	objs = append(objs, appSet)
	t.Cleanup(func() {
		// Before Argo CD stops (registered earlier, so it runs later): the Applications carry
		// the resources finalizer, which only the clusters' Argo CD can finish.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for i := len(objs) - 1; i >= 0; i-- {
			_ = client.IgnoreNotFound(s.hub.Delete(ctx, objs[i]))
		}
		for ctx.Err() == nil {
			list := pullmodel.NewApplicationList()
			if err := s.hub.List(ctx, list, client.InNamespace(fleet.ArgoCDNamespace), client.HasLabels{pullmodel.LabelPull}); err == nil && len(list.Items) == 0 {
				break
			}
			time.Sleep(time.Second)
		}
		if ctx.Err() != nil {
			t.Errorf("cleaning up: hub Applications of the pull model still there after 3 minutes")
		}
		for _, c := range clusters {
			_ = client.IgnoreNotFound(s.spokes[c].Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pullNS}}))
		}
	})
	for _, o := range objs {
		if err := s.hub.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}

	for i, c := range clusters {
		app := c + "-guestbook"
		// The manager notices Argo CD's CRDs on the hub within ten seconds and starts delivering.
		s.eventually(t, c+": hub Application "+app+" delivered as a ManifestWork", 3*time.Minute, func(ctx context.Context) (bool, string) {
			w, err := s.pullWork(ctx, c, app)
			if err != nil {
				return false, err.Error()
			}
			return w.Annotations[pullmodel.AnnotationApplicationSet] == fleet.ArgoCDNamespace+"/"+pullAppSet, fmt.Sprintf("annotations %v", w.Annotations)
		})
		if i == 0 {
			// A stock klusterlet's work agent may not write Applications: the work says so.
			s.eventually(t, c+": OCM's work agent, with OCM's stock rights only, is refused the Application", time.Minute, func(ctx context.Context) (bool, string) {
				w, err := s.pullWork(ctx, c, app)
				if err != nil {
					return false, err.Error()
				}
				cond := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
				return cond != nil && cond.Status == metav1.ConditionFalse && strings.Contains(strings.ToLower(cond.Message+describeManifestConditions(w)), "forbidden"),
					fmt.Sprintf("Applied: %+v", cond)
			})
			// The hub Application says so too.
			s.eventually(t, c+": the hub Application shows the work agent's refusal", time.Minute, func(ctx context.Context) (bool, string) {
				return hubCondition(ctx, s.hub, app, pullmodel.ConditionApplyError, "forbidden")
			})
			// The README's step for clusters whose Argo CD the addon does not install: the
			// cluster's admin lets the work agent write Applications.
			s.grantPullModelWork(t, clusters)
		}
		s.eventually(t, c+": the cluster's Argo CD synced the guestbook", 4*time.Minute, func(ctx context.Context) (bool, string) {
			d := &appsv1.Deployment{}
			if err := s.spokes[c].Get(ctx, client.ObjectKey{Namespace: pullNS, Name: guestbookName}, d); err != nil {
				st, _ := fleet.GetApplicationState(ctx, s.spokes[c], s.spokeArgoCD(c), app)
				return false, getState(err, "Deployment") + "; spoke Application: " + st.String()
			}
			return d.Annotations["argocd.argoproj.io/tracking-id"] != "", "no tracking id"
		})
		if i == 1 {
			s.checkStepOrder(t, clusters[0], c)
		}
	}
	for _, c := range clusters {
		app := c + "-guestbook"
		s.eventually(t, c+": hub Application "+app+" Synced Healthy at the commit", 3*time.Minute, func(ctx context.Context) (bool, string) {
			st, err := fleet.GetApplicationState(ctx, s.hub, fleet.ArgoCDNamespace, app)
			if err != nil {
				return false, getState(err, "Application")
			}
			return st.Sync == "Synced" && st.Health == "Healthy" && st.Revision == sha, st.String()
		})
		// RollingSync's sync request reached the spoke once and, the spoke having run it, is
		// cleared on the hub as Argo CD's own controller would clear it: a request left there
		// keeps the ApplicationSet from ever asking again, and a step whose operation started
		// within the second of its Pending transition then never moves on.
		s.eventually(t, c+": hub Application "+app+" without a sync request", time.Minute, func(ctx context.Context) (bool, string) {
			u := pullmodel.NewApplication()
			if err := s.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: app}, u); err != nil {
				return false, getState(err, "Application")
			}
			op, has := u.Object["operation"]
			if !has {
				return true, ""
			}
			return false, fmt.Sprintf("operation %v; %s", op, s.requestTrail(ctx, c, app))
		})
	}
	s.eventually(t, "hub: the ApplicationSet report shows both clusters Synced Healthy", 2*time.Minute, func(ctx context.Context) (bool, string) {
		sum, err := s.reportSummary(ctx)
		return err == nil && sum["clusters"] == "2" && sum["synced"] == "2" && sum["healthy"] == "2", fmt.Sprint(sum, err)
	})
	s.reportListsTheObjects(t, clusters)
	s.showSpokeErrorOnTheHub(t, repo.URL, clusters[0])
	s.refreshRunsOnceOnTheCluster(t, clusters[0])

	// cluster2 leaves the Placement.
	gone := clusters[len(clusters)-1]
	p := &clusterv1beta1.Placement{}
	if err := s.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: pullPlacement}, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Predicates = placementPredicates(clusters[:len(clusters)-1])
	if err := s.hub.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, gone+": hub Application, ManifestWork, spoke Application and workload gone", 4*time.Minute, func(ctx context.Context) (bool, string) {
		app := pullmodel.NewApplication()
		var left []string
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: gone + "-guestbook"}, app); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("hub Application (finalizers %v)", app.GetFinalizers()))
		}
		if _, err := s.pullWork(ctx, gone, gone+"-guestbook"); err == nil {
			left = append(left, "ManifestWork")
		}
		if err := s.spokes[gone].Get(ctx, client.ObjectKey{Namespace: s.spokeArgoCD(gone), Name: gone + "-guestbook"}, pullmodel.NewApplication()); !apierrors.IsNotFound(err) {
			left = append(left, "spoke Application")
		}
		if err := s.spokes[gone].Get(ctx, client.ObjectKey{Namespace: pullNS, Name: guestbookName}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			left = append(left, "Deployment")
		}
		return len(left) == 0, fmt.Sprint("left: ", left)
	})
	s.eventually(t, "hub: the report shows one cluster", time.Minute, func(ctx context.Context) (bool, string) {
		sum, err := s.reportSummary(ctx)
		return err == nil && sum["clusters"] == "1", fmt.Sprint(sum, err)
	})
	// The remaining cluster keeps its workload.
	if err := s.spokes[clusters[0]].Get(ctx, client.ObjectKey{Namespace: pullNS, Name: guestbookName}, &appsv1.Deployment{}); err != nil {
		t.Errorf("%s lost its guestbook: %v", clusters[0], err)
	}
	// Out of the ApplicationSet's Placement now, so freezing it moves nothing else.
	s.deleteWhileTheClusterIsOffline(t, repo.URL, gone)
	s.pullModelTenancy(ctx, t, clusters[0], gone)
}

// reportListsTheObjects: each cluster's admin runs the resource reporter (the manifests of
// `argocd-agent-addon resource-reporter manifests`, its pod from the project's image); OCM's
// work agent feeds the annotation it writes back, and the ApplicationSet report lists the
// guestbook's Deployment and Service.
func (s *suite) reportListsTheObjects(t *testing.T, clusters []string) {
	ctx := ctxFor(t)
	for _, c := range clusters {
		uninstall, err := nodeapps.InstallResourceReporter(ctx, s.f, c, s.managerBin, s.reloaderImg, s.spokeArgoCD(c))
		// Later scenarios of the lane use these namespaces.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := uninstall(ctx); err != nil {
				t.Errorf("%s: removing the resource reporter: %v", c, err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"apps/v1 Deployment " + pullNS + "/" + guestbookName, "v1 Service " + pullNS + "/" + guestbookName}
	s.eventually(t, "hub: the ApplicationSet report lists the objects the clusters' reporters see", 2*time.Minute, func(ctx context.Context) (bool, string) {
		rep := &unstructured.Unstructured{}
		rep.SetAPIVersion("apps.open-cluster-management.io/v1alpha1")
		rep.SetKind("MulticlusterApplicationSetReport")
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: pullAppSet}, rep); err != nil {
			return false, err.Error()
		}
		items, _, _ := unstructured.NestedSlice(rep.Object, "statuses", "resources")
		var got []string
		for _, it := range items {
			m, _ := it.(map[string]any)
			got = append(got, fmt.Sprintf("%v %v %v/%v", m["apiVersion"], m["kind"], m["namespace"], m["name"]))
		}
		return slices.Equal(got, want), fmt.Sprintf("resources %v", got)
	})
}

// checkStepOrder holds RollingSync's step order: second's guestbook Deployment was created no
// earlier than the ApplicationSet saw first's Application become Healthy (its progressive-sync
// status keeps the time of each Application's last transition; both have whole seconds), and
// that Healthy came after first's own Deployment existed, so the hub's view is not ahead of the
// cluster's.
func (s *suite) checkStepOrder(t *testing.T, first, second string) {
	t.Helper()
	ctx := ctxFor(t)
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("argoproj.io/v1alpha1")
	u.SetKind("ApplicationSet")
	if err := s.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: pullAppSet}, u); err != nil {
		t.Fatal(err)
	}
	statuses, _, _ := unstructured.NestedSlice(u.Object, "status", "applicationStatus")
	var healthyAt time.Time
	for _, e := range statuses {
		m, _ := e.(map[string]any)
		if m["application"] == first+"-guestbook" && m["status"] == "Healthy" {
			at, _ := m["lastTransitionTime"].(string)
			healthyAt, _ = time.Parse(time.RFC3339, at)
		}
	}
	if healthyAt.IsZero() {
		t.Fatalf("the ApplicationSet does not show %s's Application Healthy: %v", first, statuses)
	}
	firstDep := &appsv1.Deployment{}
	if err := s.spokes[first].Get(ctx, client.ObjectKey{Namespace: pullNS, Name: guestbookName}, firstDep); err != nil {
		t.Fatal(err)
	}
	if firstDep.CreationTimestamp.After(healthyAt) {
		t.Errorf("the ApplicationSet saw %s Healthy at %s, before its guestbook existed (%s)", first, healthyAt.UTC().Format(time.RFC3339), firstDep.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	d := &appsv1.Deployment{}
	if err := s.spokes[second].Get(ctx, client.ObjectKey{Namespace: pullNS, Name: guestbookName}, d); err != nil {
		t.Fatal(err)
	}
	if created := d.CreationTimestamp.Time; created.Before(healthyAt) {
		t.Errorf("%s synced at %s, before %s was Healthy at %s (RollingSync step order)", second, created.UTC().Format(time.RFC3339), first, healthyAt.UTC().Format(time.RFC3339))
	} else {
		t.Logf("RollingSync step order: %s Healthy at %s, %s's guestbook created at %s", first, healthyAt.UTC().Format(time.RFC3339), second, created.UTC().Format(time.RFC3339))
	}
}

// requestTrail says where a hub Application's sync request is on its way to the spoke and back:
// the name the ManifestWork sent it under, the run its feedback reports, and the spoke
// Application's own request and last run.
func (s *suite) requestTrail(ctx context.Context, cluster, app string) string {
	w, err := s.pullWork(ctx, cluster, app)
	if err != nil {
		return err.Error()
	}
	fb := propagation.FeedbackValues(w)
	trail := fmt.Sprintf("ManifestWork sent %q (payload %q), feedback request %q phase %q started %q",
		w.Annotations[pullmodel.AnnotationOperationRequest], propagation.RequestName(propagation.Operation(w)),
		fb[propagation.FeedbackOperationRequest], fb[propagation.FeedbackOperationPhase], fb[propagation.FeedbackOperationStarted])
	spoke := pullmodel.NewApplication()
	if err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: s.spokeArgoCD(cluster), Name: app}, spoke); err != nil {
		return trail + "; spoke Application: " + err.Error()
	}
	op, _ := spoke.Object["operation"].(map[string]any)
	ran, _, _ := unstructured.NestedMap(spoke.Object, "status", "operationState", "operation")
	phase, _, _ := unstructured.NestedString(spoke.Object, "status", "operationState", "phase")
	started, _, _ := unstructured.NestedString(spoke.Object, "status", "operationState", "startedAt")
	return trail + fmt.Sprintf("; spoke request %q (set: %t), last run %q %s started %s",
		propagation.RequestName(op), op != nil, propagation.RequestName(ran), phase, started)
}

// pullWork returns the pull-model ManifestWork of hub Application app in cluster's namespace.
func (s *suite) pullWork(ctx context.Context, cluster, app string) (*workv1.ManifestWork, error) {
	list := &workv1.ManifestWorkList{}
	if err := s.hub.List(ctx, list, client.InNamespace(cluster), client.HasLabels{pullmodel.LabelPull}); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Annotations[pullmodel.AnnotationHubAppName] == app {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no ManifestWork for %s in %s", app, cluster)
}

// reportSummary reads the ApplicationSet report's summary.
func (s *suite) reportSummary(ctx context.Context) (map[string]string, error) {
	rep := &unstructured.Unstructured{}
	rep.SetAPIVersion("apps.open-cluster-management.io/v1alpha1")
	rep.SetKind("MulticlusterApplicationSetReport")
	if err := s.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: pullAppSet}, rep); err != nil {
		return nil, err
	}
	sum, _, err := unstructured.NestedStringMap(rep.Object, "statuses", "summary")
	return sum, err
}

// pullModelTenancy: a second tenant on the same hub, with a namespace the operator allowed
// (the manager's --pull-model-namespaces), its own ManagedClusterSet holding its own cluster
// (own, a hub admin moves it there), the set's binding and an AppProject of its own. Its
// Application for its cluster is delivered, by OCM's work agent, into the spoke Argo CD
// namespace under a name of its namespace; its Application for the hub Argo CD namespace's
// cluster (other) is refused with ClusterNotBound and nothing is written to that cluster's
// namespace. An Application in a managed cluster's own hub namespace (where a principal keeps an
// autonomous agent's Applications) is never delivered either. A sync request on the tenant's
// Application that names a repository its AppProject does not permit is refused on the hub,
// and the cluster's Argo CD never fetches that repository.
func (s *suite) pullModelTenancy(ctx context.Context, t *testing.T, other, own string) {
	t.Helper()
	project := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"sourceNamespaces": []any{tenantNS},
		"sourceRepos":      []any{"https://git.example/*"},
		"destinations":     []any{map[string]any{"server": pullmodel.InClusterServer, "namespace": tenantNS + "-*"}},
	}}}
	project.SetGroupVersionKind(pullmodel.AppProjectGVK)
	project.SetNamespace(fleet.ArgoCDNamespace)
	project.SetName(tenantNS)
	// The tenant's namespace exists since the chart's install (its pull-model RBAC is there).
	objs := []client.Object{
		&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}},
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: tenantNS}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: tenantNS}},
		project,
	}
	app := func(ns, name, cluster string) *unstructured.Unstructured {
		a := fleet.NewApplication(name, ns, "https://git.example/x", "x", tenantNS+"-web")
		_ = unstructured.SetNestedField(a.Object, tenantNS, "spec", "project")
		a.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
		a.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: cluster, pullmodel.AnnotationSkipReconcile: "true"})
		return a
	}
	mine, reach, fromAgentNS := app(tenantNS, "web", own), app(tenantNS, "reach", other), app(own, "from-agent-namespace", other)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, o := range []client.Object{mine, reach, fromAgentNS} {
			_ = client.IgnoreNotFound(s.hub.Delete(ctx, o))
		}
		_ = s.setClusterSet(ctx, own, s.f.ClusterSet())
		for i := len(objs) - 1; i >= 0; i-- {
			_ = client.IgnoreNotFound(s.hub.Delete(ctx, objs[i]))
		}
	})
	for _, o := range objs {
		if err := s.hub.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	// The hub admin's step (who may join the set): the tenant's cluster moves into its set.
	if err := s.setClusterSet(ctx, own, tenantNS); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{mine, reach, fromAgentNS} {
		if err := s.hub.Create(ctx, o); err != nil {
			t.Fatalf("creating Application %s/%s: %v", o.GetNamespace(), o.GetName(), err)
		}
	}

	spokeName := tenantNS + ".web"
	s.eventually(t, fmt.Sprintf("%s: the tenant's Application applied by the work agent as %s/%s", own, s.spokeArgoCD(own), spokeName), 2*time.Minute, func(ctx context.Context) (bool, string) {
		w, err := s.pullWork(ctx, own, mine.GetName())
		if err != nil {
			return false, err.Error()
		}
		if !meta.IsStatusConditionTrue(w.Status.Conditions, workv1.WorkApplied) {
			return false, fmt.Sprintf("ManifestWork %s conditions %v", w.Name, w.Status.Conditions)
		}
		err = s.spokes[own].Get(ctx, client.ObjectKey{Namespace: s.spokeArgoCD(own), Name: spokeName}, pullmodel.NewApplication())
		return err == nil, fmt.Sprint("spoke Application: ", err)
	})
	for _, c := range []struct {
		app    *unstructured.Unstructured
		reason string
	}{{reach, "ClusterNotBound"}, {fromAgentNS, "AgentNamespace"}} {
		s.eventually(t, fmt.Sprintf("hub: %s/%s refused with %s", c.app.GetNamespace(), c.app.GetName(), c.reason), time.Minute, func(ctx context.Context) (bool, string) {
			cur := pullmodel.NewApplication()
			if err := s.hub.Get(ctx, client.ObjectKeyFromObject(c.app), cur); err != nil {
				return false, err.Error()
			}
			msg, _ := pullmodel.DeliveryCondition(cur)
			return strings.HasPrefix(msg, c.reason+": "), "condition: " + msg
		})
		if w, err := s.pullWork(ctx, other, c.app.GetName()); err == nil {
			t.Errorf("hub: %s/%s was refused but ManifestWork %s exists in %s's namespace", c.app.GetNamespace(), c.app.GetName(), w.Name, other)
		}
	}
	s.forbiddenOperationNeverFetched(ctx, t, mine, own, spokeName)
}

// forbiddenOperationNeverFetched: the tenant asks its delivered Application for a sync from a
// repository its AppProject does not permit (operation.sync.source, which the cluster's Argo
// CD would sync in place of the spec's). The hub refuses it with ProjectForbids, the
// ManifestWork and the spoke Application never carry it, and the repository, served on
// loopback, gets no request in two reconciliation periods of the cluster's Argo CD.
func (s *suite) forbiddenOperationNeverFetched(ctx context.Context, t *testing.T, app *unstructured.Unstructured, cluster, spokeName string) {
	t.Helper()
	forbidden, _ := s.gitRepo(t, "git-forbidden", "forbidden", fleet.GuestbookFiles(1, s.guestbookImg1))
	op := fmt.Sprintf(`{"operation":{"sync":{"source":{"repoURL":%q,"path":"guestbook","targetRevision":"main"}}}}`, forbidden.URL)
	if err := s.hub.Patch(ctx, app.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(op))); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, fmt.Sprintf("hub: %s/%s's operation refused with ProjectForbids", app.GetNamespace(), app.GetName()), time.Minute, func(ctx context.Context) (bool, string) {
		cur := pullmodel.NewApplication()
		if err := s.hub.Get(ctx, client.ObjectKeyFromObject(app), cur); err != nil {
			return false, err.Error()
		}
		msg, _ := pullmodel.DeliveryCondition(cur)
		return strings.HasPrefix(msg, "ProjectForbids: ") && strings.Contains(msg, forbidden.URL), "condition: " + msg
	})
	time.Sleep(2 * reconciliation)
	w, err := s.pullWork(ctx, cluster, app.GetName())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(w.Spec.Workload.Manifests[0].Raw), forbidden.URL) {
		t.Errorf("hub: the ManifestWork carries the forbidden operation")
	}
	spokeApp := pullmodel.NewApplication()
	if err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: s.spokeArgoCD(cluster), Name: spokeName}, spokeApp); err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(spokeApp.Object); strings.Contains(string(raw), forbidden.URL) {
		t.Errorf("%s: the spoke Application names the forbidden repository: %s", cluster, raw)
	}
	if n := forbidden.Requests(); n != 0 {
		t.Errorf("%s: the forbidden repository got %d requests", cluster, n)
	}
	if err := s.hub.Patch(ctx, app.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/operation"}]`))); err != nil {
		t.Fatal(err)
	}
}

// setClusterSet moves a ManagedCluster into a set (its set label).
func (s *suite) setClusterSet(ctx context.Context, cluster, set string) error {
	mc := &clusterv1.ManagedCluster{}
	if err := s.hub.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
		return err
	}
	patch := client.MergeFrom(mc.DeepCopy())
	if mc.Labels == nil {
		mc.Labels = map[string]string{}
	}
	mc.Labels[clusterv1beta2.ClusterSetLabel] = set
	return s.hub.Patch(ctx, mc, patch)
}

// showSpokeErrorOnTheHub delivers two hub Applications to cluster and shows the spoke's errors
// on the hub: one whose path does not exist in Git (the cluster's Argo CD fails to compare it),
// and one whose errors come after a warning in the spoke's conditions, which Argo CD sorts by
// type: a ConfigMap listed twice (RepeatedResourceWarning) beside one in a namespace that does
// not exist, whose failed sync Argo CD reports as SyncError. A work agent that fed back only
// the first condition would show the warning alone.
func (s *suite) showSpokeErrorOnTheHub(t *testing.T, repoURL, cluster string) {
	t.Helper()
	ctx := ctxFor(t)
	warned, _ := s.gitRepo(t, "git-warned", "warned", map[string]string{
		"app/repeated.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: repeated}\ndata: {k: v}\n---\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: repeated}\ndata: {k: v}\n",
		"app/lost.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lost, namespace: no-such-namespace}\ndata: {k: v}\n",
	})
	broken := fleet.NewApplication("broken-path", fleet.ArgoCDNamespace, repoURL, "no-such-path", pullNS)
	failing := fleet.NewApplication("warned-and-failing", fleet.ArgoCDNamespace, warned.URL, "app", pullNS)
	// Without retries: an automated sync retries a failed one five times (minutes of backoff)
	// before Argo CD reports SyncError.
	if err := unstructured.SetNestedField(failing.Object, map[string]any{"limit": int64(0)}, "spec", "syncPolicy", "retry"); err != nil {
		t.Fatal(err)
	}
	for _, app := range []*unstructured.Unstructured{broken, failing} {
		app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
		app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: cluster, pullmodel.AnnotationSkipReconcile: "true"})
		if err := s.hub.Create(ctx, app); err != nil {
			t.Fatalf("creating hub Application %s: %v", app.GetName(), err)
		}
		t.Cleanup(func() { _ = client.IgnoreNotFound(s.hub.Delete(context.Background(), app)) })
	}
	s.eventually(t, cluster+": the spoke's comparison error (path missing in Git) on the hub Application", 3*time.Minute, func(ctx context.Context) (bool, string) {
		return hubCondition(ctx, s.hub, broken.GetName(), "ComparisonError", "path")
	})
	s.eventually(t, cluster+": a warning first, then the sync error, in the spoke Application's conditions", 3*time.Minute, func(ctx context.Context) (bool, string) {
		st, err := fleet.GetApplicationState(ctx, s.spokes[cluster], s.spokeArgoCD(cluster), failing.GetName())
		if err != nil {
			return false, err.Error()
		}
		return len(st.Conditions) >= 2 && strings.HasPrefix(st.Conditions[0], "RepeatedResourceWarning:") &&
			slices.ContainsFunc(st.Conditions, func(c string) bool { return strings.HasPrefix(c, "SyncError:") }), st.String()
	})
	s.eventually(t, cluster+": the sync error listed after the warning on the hub Application", time.Minute, func(ctx context.Context) (bool, string) {
		return hubCondition(ctx, s.hub, failing.GetName(), "SyncError", "no-such-namespace")
	})
}

// refreshServed reads events, on the spoke Application app of cluster, until the work agent has
// applied a refresh request (the annotation arrives) and the cluster's Argo CD has served it
// (the annotation goes). A watch, not a poll: between two polls a periodic reconcile moves
// status.reconciledAt before the request has even arrived, which a poll would take for the
// refresh.
func refreshServed(t *testing.T, events watch.Interface, cluster, app string, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	arrived := false
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-events.ResultChan():
			if !ok {
				t.Fatalf("%s: the watch on the spoke Application %s ended", cluster, app)
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			if !isObj {
				t.Fatalf("%s: watching the spoke Application %s: %v", cluster, app, ev.Object)
			}
			_, requested := u.GetAnnotations()[pullmodel.AnnotationRefresh]
			switch {
			case requested:
				arrived = true
			case arrived:
				t.Logf("%-72s %7s", cluster+": the work agent applied the refresh request and the cluster's Argo CD served it", time.Since(start).Round(10*time.Millisecond))
				return
			}
		case <-deadline:
			if arrived {
				t.Fatalf("%s: the cluster's Argo CD did not serve the refresh request within %s", cluster, timeout)
			}
			t.Fatalf("%s: the work agent did not apply the refresh request within %s", cluster, timeout)
		}
	}
}

// refreshRunsOnceOnTheCluster asks for a hard refresh on the hub Application and checks that it
// runs once on the cluster: the spoke's Argo CD clears the request when it has refreshed, and
// OCM's work agent, applying the same manifest again, must not put the request back while the
// hub has not yet seen it served. The manager is frozen (SIGSTOP) once the request is in the
// ManifestWork, which holds the request there; a change of the ManifestWork's labels makes the
// work agent apply every manifest again at once, as its periodic resync (4 to 6 minutes) would.
func (s *suite) refreshRunsOnceOnTheCluster(t *testing.T, cluster string) {
	t.Helper()
	ctx := ctxFor(t)
	app := cluster + "-guestbook"
	spokeApps, err := dynamic.NewForConfig(s.f.SpokeConfig(cluster))
	if err != nil {
		t.Fatal(err)
	}
	apps := spokeApps.Resource(pullmodel.ArgoGroupVersion.WithResource("applications")).Namespace(s.spokeArgoCD(cluster))
	workRequests := func(ctx context.Context) (bool, *workv1.ManifestWork, error) {
		w, err := s.pullWork(ctx, cluster, app)
		if err != nil {
			return false, nil, err
		}
		m := &unstructured.Unstructured{}
		if err := m.UnmarshalJSON(w.Spec.Workload.Manifests[0].Raw); err != nil {
			return false, nil, err
		}
		_, ok := m.GetAnnotations()[pullmodel.AnnotationRefresh]
		return ok, w, nil
	}
	// The spoke Application is watched from here on: see refreshServed.
	before, err := apps.Get(ctx, app, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The work agent waits while the request goes into the ManifestWork, and the manager is
	// stopped before the agent can apply it: the hub then cannot clear the request.
	klusterlet := s.process(t, cluster+"-klusterlet-agent")
	if err := klusterlet.Pause(); err != nil {
		t.Fatal(err)
	}
	// What is stopped, each with the step that starts it again, run once.
	stopped := map[string]func(){"klusterlet": func() {
		if err := klusterlet.Resume(); err != nil {
			t.Error(err)
		}
	}}
	resume := func(what string) {
		if start, ok := stopped[what]; ok {
			delete(stopped, what)
			start()
		}
	}
	t.Cleanup(func() {
		for what := range stopped {
			resume(what)
		}
	})
	hubApp := pullmodel.NewApplication()
	hubApp.SetNamespace(fleet.ArgoCDNamespace)
	hubApp.SetName(app)
	if err := s.hub.Patch(ctx, hubApp, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"hard"}}}`, pullmodel.AnnotationRefresh))); err != nil {
		t.Fatal(err)
	}
	// The ManifestWork's generation once it carries the request: a manifest changed after that
	// (a new hash) is one the work agent applies again, request included.
	var requestedGeneration int64
	s.eventually(t, cluster+": the refresh request in the ManifestWork", time.Minute, func(ctx context.Context) (bool, string) {
		ok, w, err := workRequests(ctx)
		if ok {
			requestedGeneration = w.Generation
		}
		return ok, fmt.Sprint("no refresh annotation in the manifest ", err)
	})
	stopped["manager"] = s.stopManager(t)
	// One watch from before the work agent resumes: it sees the request arrive and be served,
	// then whatever the work agent does after.
	watch, err := apps.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + app, ResourceVersion: before.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	resume("klusterlet")
	refreshServed(t, watch, cluster, app, 2*time.Minute)
	still, w, err := workRequests(ctx)
	if err != nil || !still {
		t.Fatalf("the hub withdrew the refresh request while the manager was frozen (%v): nothing to check", err)
	}
	if err := s.hub.Patch(ctx, w, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"e2e-resync":"1"}}}`))); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(15 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-watch.ResultChan():
			if !ok {
				t.Fatal("watch on the spoke Application ended")
			}
			if u, isObj := ev.Object.(*unstructured.Unstructured); isObj {
				if _, again := u.GetAnnotations()[pullmodel.AnnotationRefresh]; again {
					t.Errorf("%s: the work agent put the cleared refresh request back (resourceVersion %s): the cluster refreshes again; the ManifestWork's generation was %d when it took the request and %d at the resync",
						cluster, u.GetResourceVersion(), requestedGeneration, w.Generation)
					done = true
				}
			}
		case <-deadline:
			done = true
		}
	}
	resume("manager")
	s.eventually(t, "hub: the refresh served, the request withdrawn from the Application and the ManifestWork", time.Minute, func(ctx context.Context) (bool, string) {
		u := pullmodel.NewApplication()
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: app}, u); err != nil {
			return false, err.Error()
		}
		_, onHub := u.GetAnnotations()[pullmodel.AnnotationRefresh]
		inWork, _, err := workRequests(ctx)
		return !onHub && !inWork && err == nil, fmt.Sprintf("on the hub Application %v, in the ManifestWork %v %v", onHub, inWork, err)
	})
}

// offlineNS is the workload namespace of the offline-deletion scenario on the cluster.
const offlineNS = "guestbook-offline"

// deleteWhileTheClusterIsOffline deletes a hub Application while its cluster's klusterlet is
// frozen: the hub Application goes after --pull-model-offline-release-after with a Warning Event
// (the ManifestWork stays marked for deletion), and once the klusterlet runs again the work agent
// deletes the spoke Application, whose finalizer makes the cluster's Argo CD delete the workload.
func (s *suite) deleteWhileTheClusterIsOffline(t *testing.T, repoURL, cluster string) {
	t.Helper()
	ctx := ctxFor(t)
	// A short lease, so that the hub sees the frozen cluster as unavailable within seconds
	// (OCM waits five lease periods).
	s.setLeaseDuration(t, cluster, 4)
	t.Cleanup(func() { s.setLeaseDuration(t, cluster, 60) })
	app := fleet.NewApplication("offline-guestbook", fleet.ArgoCDNamespace, repoURL, "guestbook", offlineNS)
	app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
	app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: cluster, pullmodel.AnnotationSkipReconcile: "true"})
	app.SetFinalizers([]string{pullmodel.ResourcesFinalizer})
	if err := s.hub.Create(ctx, app); err != nil {
		t.Fatalf("creating hub Application %s: %v", app.GetName(), err)
	}
	s.eventually(t, cluster+": the offline scenario's guestbook synced", 3*time.Minute, func(ctx context.Context) (bool, string) {
		err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: offlineNS, Name: guestbookName}, &appsv1.Deployment{})
		return err == nil, getState(err, "Deployment")
	})
	w, err := s.pullWork(ctx, cluster, app.GetName())
	if err != nil {
		t.Fatal(err)
	}
	klusterlet := s.process(t, cluster+"-klusterlet-agent")
	if err := klusterlet.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := klusterlet.Resume(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume)
	s.eventually(t, cluster+": unavailable on the hub once its klusterlet is frozen", 2*time.Minute, func(ctx context.Context) (bool, string) {
		mc := &clusterv1.ManagedCluster{}
		if err := s.hub.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
			return false, err.Error()
		}
		return !meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable), fmt.Sprint(mc.Status.Conditions)
	})
	if err := s.hub.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, "hub: the Application released while its cluster is offline", 2*time.Minute, func(ctx context.Context) (bool, string) {
		err := s.hub.Get(ctx, client.ObjectKeyFromObject(app), pullmodel.NewApplication())
		return apierrors.IsNotFound(err), getState(err, "Application")
	})
	cur := &workv1.ManifestWork{}
	if err := s.hub.Get(ctx, client.ObjectKeyFromObject(w), cur); err != nil || cur.DeletionTimestamp == nil {
		t.Errorf("the ManifestWork should wait, marked for deletion, for the cluster: %v", err)
	}
	if err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: offlineNS, Name: guestbookName}, &appsv1.Deployment{}); err != nil {
		t.Errorf("the workload went while the cluster was frozen: %v", err)
	}
	resume()
	s.eventually(t, cluster+": back, the work agent and Argo CD delete the workload and the ManifestWork", 3*time.Minute, func(ctx context.Context) (bool, string) {
		var left []string
		if err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: offlineNS, Name: guestbookName}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			left = append(left, "Deployment")
		}
		if err := s.hub.Get(ctx, client.ObjectKeyFromObject(w), &workv1.ManifestWork{}); !apierrors.IsNotFound(err) {
			left = append(left, "ManifestWork")
		}
		return len(left) == 0, fmt.Sprint("left: ", left)
	})
	_ = client.IgnoreNotFound(s.spokes[cluster].Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: offlineNS}}))
}

// setLeaseDuration sets a ManagedCluster's lease period, as a hub admin may.
func (s *suite) setLeaseDuration(t *testing.T, cluster string, seconds int32) {
	t.Helper()
	// A merge patch, not an update: the hub writes the ManagedCluster's status all the while
	// (its availability changes when the klusterlet freezes and resumes), and an update sent
	// with the resourceVersion of a moment ago is refused with a conflict.
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}
	patch := fmt.Appendf(nil, `{"spec":{"leaseDurationSeconds":%d}}`, seconds)
	if err := s.hub.Patch(context.Background(), mc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("setting ManagedCluster %s's lease duration to %d s: %v", cluster, seconds, err)
	}
}

// process returns the fleet process of that name.
func (s *suite) process(t *testing.T, name string) *fleet.Process {
	t.Helper()
	for _, p := range s.f.Processes() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no fleet process %s", name)
	return nil
}

// hubCondition reports whether the hub Application has a condition of that type whose message
// contains text.
func hubCondition(ctx context.Context, hub client.Client, app, condType, text string) (bool, string) {
	u := pullmodel.NewApplication()
	if err := hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: app}, u); err != nil {
		return false, getState(err, "Application")
	}
	for _, c := range pullmodel.Conditions(u) {
		m, _ := c.(map[string]any)
		msg, _ := m["message"].(string)
		if m["type"] == condType && strings.Contains(msg, text) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("conditions %v", pullmodel.Conditions(u))
}

// spokeArgoCD is the namespace of cluster's own Argo CD in the pull-model scenarios: the
// agent's namespace unless moveSpokeArgoCD moved it.
func (s *suite) spokeArgoCD(cluster string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ns, ok := s.spokeArgoNS[cluster]; ok {
		return ns
	}
	return agentNS
}

// moveSpokeArgoCD is the hub admin's per-cluster setting for the rest of the test: the pull
// model delivers cluster's Applications into namespace, where its own Argo CD runs (the
// ManagedCluster label the cluster's own identities may not set).
func (s *suite) moveSpokeArgoCD(t *testing.T, cluster, namespace string) {
	t.Helper()
	setLabel := func(value string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			mc := &clusterv1.ManagedCluster{}
			if err := s.hub.Get(context.Background(), client.ObjectKey{Name: cluster}, mc); err != nil {
				return err
			}
			if value == "" {
				delete(mc.Labels, propagation.LabelSpokeNamespace)
			} else {
				if mc.Labels == nil {
					mc.Labels = map[string]string{}
				}
				mc.Labels[propagation.LabelSpokeNamespace] = value
			}
			return s.hub.Update(context.Background(), mc)
		})
	}
	if err := setLabel(namespace); err != nil {
		t.Fatalf("labelling ManagedCluster %s: %v", cluster, err)
	}
	s.mu.Lock()
	s.spokeArgoNS[cluster] = namespace
	s.mu.Unlock()
	t.Cleanup(func() {
		if err := setLabel(""); err != nil {
			t.Errorf("unlabelling ManagedCluster %s: %v", cluster, err)
		}
		s.mu.Lock()
		delete(s.spokeArgoNS, cluster)
		s.mu.Unlock()
	})
}

// grantPullModelWork applies, on each cluster, the ClusterRole the README tells the admin of a
// cluster with its own Argo CD to apply (the Argo CD components addon applies it itself).
// A test that grants starts with stockWorkAgentRights, which takes the grant back.
func (s *suite) grantPullModelWork(t *testing.T, clusters []string) {
	t.Helper()
	ctx := ctxFor(t)
	for _, c := range clusters {
		if err := s.spokes[c].Create(ctx, spoke.PullModelWorkAgentRole()); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: granting OCM's work agent the pull model's rights: %v", c, err)
		}
	}
}

// stockWorkAgentRights fails the test unless OCM's work agent has OCM's stock rights only on
// each cluster, and takes back, when the test ends, what grantPullModelWork gives it. Called
// first, its cleanup runs last: the work agent keeps the rights while the test's own cleanups
// delete the Applications it delivered.
func (s *suite) stockWorkAgentRights(t *testing.T, clusters []string) {
	t.Helper()
	ctx := ctxFor(t)
	for _, c := range clusters {
		role := spoke.PullModelWorkAgentRole()
		err := s.spokes[c].Get(ctx, client.ObjectKeyFromObject(role), role)
		if err == nil {
			t.Fatalf("%s: ClusterRole %s is left from an earlier test: OCM's work agent has more than its stock rights", c, role.GetName())
		}
		if !apierrors.IsNotFound(err) {
			t.Fatalf("%s: reading ClusterRole %s: %v", c, role.GetName(), err)
		}
		t.Cleanup(func() {
			if err := client.IgnoreNotFound(s.spokes[c].Delete(context.Background(), spoke.PullModelWorkAgentRole())); err != nil {
				t.Errorf("%s: taking the pull model's rights back from OCM's work agent: %v", c, err)
			}
		})
	}
}

// startPullModelArgoCD starts, for the rest of the test, Argo CD's repo-server and
// application-controller on each cluster (in its spokeArgoCD namespace, reconciling every
// reconciliation period) and the applicationset-controller on the hub with hubCmdParams.
func (s *suite) startPullModelArgoCD(t *testing.T, ctx context.Context, clusters []string, hubCmdParams map[string]string) {
	t.Helper()
	var argos []*fleet.ArgoCD
	t.Cleanup(func() {
		var errs []error
		for _, a := range argos {
			errs = append(errs, a.Stop())
		}
		if err := errors.Join(errs...); err != nil {
			t.Errorf("stopping Argo CD: %v", err)
		}
	})
	for _, c := range clusters {
		start := time.Now()
		a, err := s.f.StartArgoCD(ctx, c, fleet.ArgoCDOptions{Namespace: s.spokeArgoCD(c), ArgoCDCM: map[string]string{
			"timeout.reconciliation": reconciliation.String(), "timeout.reconciliation.jitter": "1s",
		}})
		if err != nil {
			t.Fatal(err)
		}
		argos = append(argos, a)
		t.Logf("%-72s %7s", c+": Argo CD up in "+s.spokeArgoCD(c)+" (repo-server, application-controller)", time.Since(start).Round(10*time.Millisecond))
	}
	start := time.Now()
	hubArgo, err := s.f.StartArgoCD(ctx, "hub", fleet.ArgoCDOptions{ApplicationSetOnly: true, CmdParams: hubCmdParams})
	if err != nil {
		t.Fatal(err)
	}
	argos = append(argos, hubArgo)
	t.Logf("%-72s %7s", "hub: Argo CD CRDs and applicationset-controller up", time.Since(start).Round(10*time.Millisecond))
}

// describeManifestConditions renders the conditions of a ManifestWork's manifests.
func describeManifestConditions(w *workv1.ManifestWork) string {
	var out []string
	for _, m := range w.Status.ResourceStatus.Manifests {
		out = append(out, describeConditions(m.Conditions))
	}
	return strings.Join(out, "; ")
}
