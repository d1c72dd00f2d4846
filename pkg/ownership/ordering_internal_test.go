package ownership

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// TestOnePrecedenceRule: the GitOpsCluster that decides a principal's PKI is the one that would
// own a cluster they both select (Less), also for equal creation times, where comparing
// "namespace/name" strings ("a-b/x" before "a/z") and comparing namespace first ("a" before
// "a-b") disagree.
func TestOnePrecedenceRule(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	goc := func(ns, name string) v1alpha1.GitOpsCluster {
		g := v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: created}}
		g.Spec.ArgoCDAgentAddon.PrincipalNamespace = "argocd"
		return g
	}
	items := []v1alpha1.GitOpsCluster{goc("a-b", "x"), goc("a", "z")}
	members := Members{&items[0], &items[1]}
	all := func(*v1alpha1.GitOpsCluster) bool { return true }
	for i := range items {
		elder := members.Elder(&items[i], all)
		first := &items[0]
		if Less(&items[1], &items[0]) {
			first = &items[1]
		}
		if elder.Namespace != first.Namespace || elder.Name != first.Name {
			t.Errorf("seen from %s/%s: the PKI follows %s/%s, the clusters %s/%s", items[i].Namespace, items[i].Name,
				elder.Namespace, elder.Name, first.Namespace, first.Name)
		}
	}
}
