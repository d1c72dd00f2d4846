package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/clusters"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
)

// Names of the outage scenario.
const (
	outageTolerant = "outage-tolerant" // a Placement tolerating OCM's outage taints
	outagePlain    = "outage-plain"    // a Placement without tolerations, behind the registration
	outageReg      = "outage"
)

// testPullModelSurvivesAnOutage freezes a cluster's klusterlet past its lease grace, until OCM's
// hub taints the cluster unreachable, and lets it run again: the guestbooks two ApplicationSets
// delivered there are never deleted. One ApplicationSet reads a Placement that tolerates OCM's
// outage taints (clusterDecisionResource, as the examples are written); the other selects the
// cluster secrets of an ArgoCDClusterRegistration whose Placement does not tolerate them, so the
// Placement drops the cluster and the registration keeps its secret through the grace
// (--pull-model-registration-grace). Both hub Applications, their ManifestWorks, the spoke
// Applications and the Deployments keep their UIDs.
func testPullModelSurvivesAnOutage(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	s.labelClusters(t)
	c := s.f.Clusters()[0]
	s.stockWorkAgentRights(t, []string{c})
	// A short lease, set first so that the klusterlet renews at that pace before it is frozen:
	// the hub sees it unreachable after five periods (20 s) instead of five minutes.
	s.setLeaseDuration(t, c, 4)
	t.Cleanup(func() { s.setLeaseDuration(t, c, 60) })

	repo, _ := s.gitRepo(t, "git-outage", "guestbook", fleet.GuestbookFiles(1, s.guestbookImg1))
	s.startPullModelArgoCD(t, ctx, []string{c}, nil)
	s.grantPullModelWork(t, []string{c})

	argoNS := fleet.ArgoCDNamespace
	outageTolerations := []clusterv1beta1.Toleration{
		{Key: clusterv1.ManagedClusterTaintUnreachable, Operator: clusterv1beta1.TolerationOpExists},
		{Key: clusterv1.ManagedClusterTaintUnavailable, Operator: clusterv1beta1.TolerationOpExists},
	}
	objs := []client.Object{
		&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: outageTolerant},
			Spec: clusterv1beta1.PlacementSpec{Predicates: placementPredicates([]string{c}), Tolerations: outageTolerations}},
		&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: outagePlain},
			Spec: clusterv1beta1.PlacementSpec{Predicates: placementPredicates([]string{c})}},
		&v1alpha1.ArgoCDClusterRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: outageReg},
			Spec: v1alpha1.ArgoCDClusterRegistrationSpec{PlacementRef: v1alpha1.PlacementReference{Name: outagePlain}}},
		outageAppSet(t, "outage-by-decision", `
  - clusterDecisionResource:
      configMapRef: ocm-placement-generator
      labelSelector:
        matchLabels: {cluster.open-cluster-management.io/placement: `+outageTolerant+`}
      requeueAfterSeconds: 5`, "{{name}}-outage-decision", "guestbook-outage-a", repo.URL),
		outageAppSet(t, "outage-by-secret", `
  - clusters:
      selector:
        matchLabels: {`+clusters.LabelRegistration+`: `+outageReg+`}`, "{{name}}-outage-secret", "guestbook-outage-b", repo.URL),
	}
	binding := &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: s.f.ClusterSet()},
		Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: s.f.ClusterSet()}}
	if err := s.hub.Create(ctx, binding); err == nil {
		objs = append([]client.Object{binding}, objs...)
	} else if !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var errs []error
		for i := len(objs) - 1; i >= 0; i-- {
			errs = append(errs, client.IgnoreNotFound(s.hub.Delete(ctx, objs[i])))
		}
		for _, n := range []string{"guestbook-outage-a", "guestbook-outage-b"} {
			errs = append(errs, client.IgnoreNotFound(s.spokes[c].Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})))
		}
		if err := errors.Join(errs...); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	for _, o := range objs {
		if o == binding {
			continue
		}
		if err := s.hub.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}

	// What the outage must leave alone, by UID.
	type delivered struct{ app, ns string }
	deliveries := []delivered{{c + "-outage-decision", "guestbook-outage-a"}, {c + "-outage-secret", "guestbook-outage-b"}}
	uids := map[string]types.UID{}
	for _, d := range deliveries {
		s.eventually(t, c+": "+d.app+" delivered and its guestbook synced", 5*time.Minute, func(ctx context.Context) (bool, string) {
			dep := &appsv1.Deployment{}
			if err := s.spokes[c].Get(ctx, client.ObjectKey{Namespace: d.ns, Name: guestbookName}, dep); err != nil {
				st, _ := fleet.GetApplicationState(ctx, s.spokes[c], argoNS, d.app)
				return false, getState(err, "Deployment") + "; spoke Application: " + st.String()
			}
			return dep.Annotations["argocd.argoproj.io/tracking-id"] != "", "no tracking id"
		})
		for what, uid := range s.outageUIDs(ctx, t, c, d.app, d.ns) {
			uids[what] = uid
		}
	}

	klusterlet := s.process(t, c+"-klusterlet-agent")
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
	frozen := time.Now()
	s.eventually(t, "hub: "+c+" tainted unreachable once its klusterlet is frozen", 2*time.Minute, func(ctx context.Context) (bool, string) {
		mc := &clusterv1.ManagedCluster{}
		if err := s.hub.Get(ctx, client.ObjectKey{Name: c}, mc); err != nil {
			return false, err.Error()
		}
		return hasOutageTaint(mc), fmt.Sprintf("taints %v", mc.Spec.Taints)
	})
	t.Logf("%-72s %7s", "hub: tainted after the freeze", time.Since(frozen).Round(10*time.Millisecond))
	s.eventually(t, "hub: the plain Placement drops "+c+", the tolerant one keeps it", time.Minute, func(ctx context.Context) (bool, string) {
		plain, err1 := s.decidedBy(ctx, argoNS, outagePlain)
		tolerant, err2 := s.decidedBy(ctx, argoNS, outageTolerant)
		if err := errors.Join(err1, err2); err != nil {
			return false, err.Error()
		}
		return len(plain) == 0 && slices.Equal(tolerant, []string{c}), fmt.Sprintf("plain %v, tolerant %v", plain, tolerant)
	})
	s.eventually(t, "hub: the registration keeps "+c+"'s secret through the outage", time.Minute, func(ctx context.Context) (bool, string) {
		reg := &v1alpha1.ArgoCDClusterRegistration{}
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: outageReg}, reg); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(reg.Status.Conditions, clusters.ConditionReady)
		return cond != nil && cond.Reason == clusters.ReasonKeptThroughOutage, describeConditions(reg.Status.Conditions)
	})
	// Long enough for both generators to run again (the decision one every 5 s) while the
	// cluster is out: nothing on the hub may go meanwhile.
	for hold := time.Now(); time.Since(hold) < 20*time.Second; time.Sleep(2 * time.Second) {
		for _, d := range deliveries {
			app := pullmodel.NewApplication()
			if err := s.hub.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: d.app}, app); err != nil || app.GetUID() != uids["hub Application "+d.app] || app.GetDeletionTimestamp() != nil {
				t.Fatalf("hub Application %s went during the outage: %v (uid %s, deleting %v)", d.app, err, app.GetUID(), app.GetDeletionTimestamp())
			}
		}
	}
	t.Logf("%-72s %7s", "hub: kept through the outage; klusterlet frozen for", time.Since(frozen).Round(10*time.Millisecond))

	resume()
	back := time.Now()
	s.eventually(t, "hub: "+c+" available again, untainted, selected by both Placements", 2*time.Minute, func(ctx context.Context) (bool, string) {
		mc := &clusterv1.ManagedCluster{}
		if err := s.hub.Get(ctx, client.ObjectKey{Name: c}, mc); err != nil {
			return false, err.Error()
		}
		plain, err := s.decidedBy(ctx, argoNS, outagePlain)
		if err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable) && !hasOutageTaint(mc) && slices.Equal(plain, []string{c}),
			fmt.Sprintf("taints %v, plain Placement %v", mc.Spec.Taints, plain)
	})
	s.eventually(t, "hub: the registration Registered, the secret's outage record gone", time.Minute, func(ctx context.Context) (bool, string) {
		reg := &v1alpha1.ArgoCDClusterRegistration{}
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: outageReg}, reg); err != nil {
			return false, err.Error()
		}
		sec := &corev1.Secret{}
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: clusters.SecretName(c)}, sec); err != nil {
			return false, err.Error()
		}
		_, recorded := sec.Annotations[clusters.AnnotationKeptSince]
		cond := meta.FindStatusCondition(reg.Status.Conditions, clusters.ConditionReady)
		return cond != nil && cond.Reason == clusters.ReasonRegistered && !recorded, describeConditions(reg.Status.Conditions)
	})
	// The work agent, running again, has acted on whatever the hub holds for it by now (it
	// deletes an orphaned Application at once): every object is still the one from before.
	time.Sleep(max(0, 30*time.Second-time.Since(back)))
	for _, d := range deliveries {
		for what, uid := range s.outageUIDs(ctx, t, c, d.app, d.ns) {
			if uid != uids[what] {
				t.Errorf("%s was replaced during the outage: uid %s, was %s", what, uid, uids[what])
			}
		}
		s.eventually(t, "hub: "+d.app+" Synced Healthy", 2*time.Minute, func(ctx context.Context) (bool, string) {
			st, err := fleet.GetApplicationState(ctx, s.hub, argoNS, d.app)
			if err != nil {
				return false, getState(err, "Application")
			}
			return st.Sync == "Synced" && st.Health == "Healthy", st.String()
		})
	}
	t.Logf("%-72s %7s", c+": back; the workloads' UIDs unchanged, never deleted", time.Since(back).Round(10*time.Millisecond))
}

// outageUIDs returns the UIDs of a delivered Application's objects: the hub Application, its
// ManifestWork, the spoke Application and the guestbook's Deployment; a missing or deleting one
// fails the test.
func (s *suite) outageUIDs(ctx context.Context, t *testing.T, cluster, app, ns string) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	check := func(what string, o metav1.Object, err error) {
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if o.GetDeletionTimestamp() != nil {
			t.Fatalf("%s is being deleted", what)
		}
		out[what] = o.GetUID()
	}
	hubApp := pullmodel.NewApplication()
	check("hub Application "+app, hubApp, s.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: app}, hubApp))
	w, err := s.pullWork(ctx, cluster, app)
	if w == nil {
		w = &workv1.ManifestWork{}
	}
	check("ManifestWork of "+app, w, err)
	spokeApp := pullmodel.NewApplication()
	check("spoke Application "+app, spokeApp, s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: agentNS, Name: app}, spokeApp))
	dep := &appsv1.Deployment{}
	check("Deployment "+ns+"/"+guestbookName, dep, s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: ns, Name: guestbookName}, dep))
	return out
}

// decidedBy lists the clusters a Placement's decisions hold.
func (s *suite) decidedBy(ctx context.Context, namespace, placement string) ([]string, error) {
	list := &clusterv1beta1.PlacementDecisionList{}
	if err := s.hub.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1beta1.PlacementLabel: placement}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no PlacementDecision of %s/%s yet", namespace, placement)
	}
	var out []string
	for _, d := range list.Items {
		for _, c := range d.Status.Decisions {
			out = append(out, c.ClusterName)
		}
	}
	slices.Sort(out)
	return out, nil
}

func hasOutageTaint(mc *clusterv1.ManagedCluster) bool {
	for _, t := range mc.Spec.Taints {
		if t.Key == clusterv1.ManagedClusterTaintUnreachable || t.Key == clusterv1.ManagedClusterTaintUnavailable {
			return true
		}
	}
	return false
}

// outageAppSet is a pull-model ApplicationSet delivering the guestbook into ns on each cluster
// its generator yields.
func outageAppSet(t *testing.T, name, generators, appName, ns, repoURL string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(fmt.Appendf(nil, `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: %s, namespace: %s}
spec:
  generators:%s
  template:
    metadata:
      name: '%s'
      labels:
        apps.open-cluster-management.io/pull-to-ocm-managed-cluster: 'true'
      annotations:
        argocd.argoproj.io/skip-reconcile: 'true'
        apps.open-cluster-management.io/ocm-managed-cluster: '{{name}}'
    spec:
      project: default
      source: {repoURL: %q, path: guestbook, targetRevision: main}
      destination: {server: https://kubernetes.default.svc, namespace: %s}
      syncPolicy:
        automated: {prune: true}
        syncOptions: [CreateNamespace=true]
`, name, fleet.ArgoCDNamespace, generators, appName, repoURL, ns), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}
