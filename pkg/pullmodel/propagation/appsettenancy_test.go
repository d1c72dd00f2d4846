package propagation_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
)

// TestApplicationSetMembersReachOnlyBoundClusters: admission trusts the ApplicationSet
// controller, so a tenant's ApplicationSet gets hub Applications for any cluster its generator
// names. The manager delivers a member to a cluster bound to the set's namespace, and refuses
// one for another cluster with ClusterNotBound, writing nothing to that cluster.
func TestApplicationSetMembersReachOnlyBoundClusters(t *testing.T) {
	tenantSetup(t)
	s.CreateCluster(t, "appset-elsewhere", true) // in the set bound to the hub Argo CD namespace only
	set := s.NewAppSetIn(t, pulltest.TenantNS, "tenant-generated", pulltest.TenantNS)
	owned := []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "ApplicationSet", Name: set.GetName(), UID: set.GetUID()}}

	bound := tenantApp("generated-bound", "tenant-a-c1")
	bound.SetOwnerReferences(owned)
	s.Create(t, bound)
	unbound := tenantApp("generated-elsewhere", "appset-elsewhere")
	unbound.SetOwnerReferences(owned)
	s.Create(t, unbound)

	s.WaitWork(t, getAppIn(t, pulltest.TenantNS, bound.GetName()), "tenant-a-c1")
	waitRefusedIn(t, pulltest.TenantNS, unbound.GetName(), propagation.ReasonClusterNotBound)
	if got := worksOf(t, pulltest.TenantNS, unbound.GetName()); len(got) != 0 {
		t.Errorf("the member for an unbound cluster was delivered: %s/%s", got[0].Namespace, got[0].Name)
	}
	list := &workv1.ManifestWorkList{}
	if err := s.Client.List(context.Background(), list, client.InNamespace("appset-elsewhere")); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d ManifestWork(s) written to the unbound cluster", len(list.Items))
	}
}
