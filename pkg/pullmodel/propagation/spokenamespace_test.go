package propagation

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

func TestPolicyForCluster(t *testing.T) {
	p := DefaultPolicy()
	for _, c := range []struct {
		labels  map[string]string
		want    string
		refused bool
	}{
		{nil, "argocd", false},
		{map[string]string{LabelSpokeNamespace: "openshift-gitops"}, "openshift-gitops", false},
		{map[string]string{LabelSpokeNamespace: ""}, "", true},
		{map[string]string{LabelSpokeNamespace: "Open_Shift"}, "", true},
		{map[string]string{LabelSpokeNamespace: "a.b"}, "", true},
	} {
		got, ref := p.ForCluster(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Labels: c.labels}})
		if (ref != nil) != c.refused {
			t.Errorf("%v: refusal %v, want refused=%v", c.labels, ref, c.refused)
			continue
		}
		if ref != nil {
			if ref.Reason != ReasonBadSpokeNamespace {
				t.Errorf("%v: reason %s", c.labels, ref.Reason)
			}
			continue
		}
		if got.SpokeNamespace != c.want || got.ArgoCDNamespace != p.ArgoCDNamespace {
			t.Errorf("%v: policy %+v, want spoke namespace %q", c.labels, got, c.want)
		}
	}
	if got, ref := p.ForCluster(nil); ref != nil || got.SpokeNamespace != "argocd" {
		t.Errorf("no cluster: %+v %v", got, ref)
	}
}
