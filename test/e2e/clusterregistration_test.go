package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/clusters"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
)

// tierLabel is the ManagedCluster label the ApplicationSets select on.
const tierLabel = "e2e.argocd-agent-addon.io/tier"

// testArgoCDClusterRegistrationForApplicationSets runs Argo CD's own applicationset-controller on
// the hub against the cluster secrets an ArgoCDClusterRegistration writes: a cluster generator
// selecting by a ManagedCluster label, and a clusterDecisionResource generator reading the
// Placement through the chart's ocm-placement-generator ConfigMap, each yield the Applications
// of the right clusters; a label change on a ManagedCluster reaches the generator.
func testArgoCDClusterRegistrationForApplicationSets(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	argoNS := fleet.ArgoCDNamespace
	const placementName = "appset-clusters"

	s.setTier(t, map[string]string{"cluster1": "gold", "cluster2": "silver"})
	start := time.Now()
	argo, err := s.f.StartArgoCD(ctx, "hub", fleet.ArgoCDOptions{ApplicationSetController: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%-72s %7s", "hub: Argo CD up (repo-server, application-controller, applicationset-controller)", time.Since(start).Round(10*time.Millisecond))

	// The chart's install made the ocm-placement-generator ConfigMap and the generator's read
	// access to PlacementDecisions (see the suite's set-up).
	var created []client.Object
	binding := &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: s.f.ClusterSet()},
		Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: s.f.ClusterSet()}}
	pl := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: placementName},
		Spec: clusterv1beta1.PlacementSpec{ClusterSets: []string{s.f.ClusterSet()}}}
	reg := &v1alpha1.ArgoCDClusterRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: "fleet"},
		Spec: v1alpha1.ArgoCDClusterRegistrationSpec{PlacementRef: v1alpha1.PlacementReference{Name: placementName}}}
	byLabel := applicationSet(t, "by-tier", `
  - clusters:
      selector:
        matchLabels: {`+tierLabel+`: gold}`, "gold-{{.name}}")
	byPlacement := applicationSet(t, "by-placement", `
  - clusterDecisionResource:
      configMapRef: ocm-placement-generator
      labelSelector:
        matchLabels: {cluster.open-cluster-management.io/placement: `+placementName+`}
      requeueAfterSeconds: 5`, "pd-{{.name}}")
	created = append(created, binding, pl, reg, byLabel, byPlacement)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var errs []error
		for i := len(created) - 1; i >= 0; i-- {
			errs = append(errs, client.IgnoreNotFound(s.hub.Delete(ctx, created[i])))
		}
		errs = append(errs, argo.Stop())
		if err := errors.Join(errs...); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	for _, o := range created {
		if err := s.hub.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}

	s.eventually(t, "hub: cluster secrets of cluster1 and cluster2 with their tier labels", 2*time.Minute, func(ctx context.Context) (bool, string) {
		for c, tier := range map[string]string{"cluster1": "gold", "cluster2": "silver"} {
			sec := &corev1.Secret{}
			if err := s.hub.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: clusters.SecretName(c)}, sec); err != nil {
				return false, getState(err, "Secret "+clusters.SecretName(c))
			}
			if sec.Labels[tierLabel] != tier {
				return false, fmt.Sprintf("%s labels %v", sec.Name, sec.Labels)
			}
		}
		return true, ""
	})
	s.waitApplications(t, "cluster generator by ManagedCluster label: gold-cluster1 only", "by-tier", "gold-cluster1")
	s.waitApplications(t, "clusterDecisionResource over the Placement: pd-cluster1, pd-cluster2", "by-placement", "pd-cluster1", "pd-cluster2")

	s.setTier(t, map[string]string{"cluster2": "gold"})
	s.waitApplications(t, "after cluster2 turned gold: gold-cluster1, gold-cluster2", "by-tier", "gold-cluster1", "gold-cluster2")
}

// applicationSet is an ApplicationSet in the hub's Argo CD namespace with the given generators;
// its Applications carry skip-reconcile (as pull-model ones do), so the hub's application
// controller leaves them alone.
func applicationSet(t *testing.T, name, generators, appName string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(fmt.Appendf(nil, `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: %s, namespace: %s}
spec:
  goTemplate: true
  generators:%s
  template:
    metadata:
      name: '%s'
      annotations: {argocd.argoproj.io/skip-reconcile: "true"}
    spec:
      project: default
      source: {repoURL: https://git.example/unused.git, path: guestbook, targetRevision: main}
      destination: {name: '{{.name}}', namespace: guestbook}
`, name, fleet.ArgoCDNamespace, generators, appName), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// waitApplications waits until exactly the named Applications of the ApplicationSet exist.
func (s *suite) waitApplications(t *testing.T, what, appSet string, want ...string) {
	t.Helper()
	sort.Strings(want)
	s.eventually(t, "hub: "+what, 2*time.Minute, func(ctx context.Context) (bool, string) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(fleet.ApplicationGVK.GroupVersion().WithKind("ApplicationList"))
		if err := s.hub.List(ctx, list, client.InNamespace(fleet.ArgoCDNamespace)); err != nil {
			return false, err.Error()
		}
		var got []string
		for _, a := range list.Items {
			for _, o := range a.GetOwnerReferences() {
				if o.Kind == "ApplicationSet" && o.Name == appSet {
					got = append(got, a.GetName())
				}
			}
		}
		sort.Strings(got)
		return slices.Equal(got, want), fmt.Sprintf("Applications of %s: %v", appSet, got)
	})
}

// setTier sets tierLabel on ManagedClusters.
func (s *suite) setTier(t *testing.T, tiers map[string]string) {
	t.Helper()
	ctx := ctxFor(t)
	for c, tier := range tiers {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			mc := &clusterv1.ManagedCluster{}
			if err := s.hub.Get(ctx, client.ObjectKey{Name: c}, mc); err != nil {
				return err
			}
			if mc.Labels == nil {
				mc.Labels = map[string]string{}
			}
			mc.Labels[tierLabel] = tier
			return s.hub.Update(ctx, mc)
		})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("labelling ManagedCluster %s: %v", c, err)
		}
	}
}
