package gitopscluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// TestSamePrincipalWakes: a member of a principal wakes the others when its spec changes or
// its status names another principal address (the elder must put it on the serving
// certificate), and not on its other status writes, which would wake them in a loop.
func TestSamePrincipalWakes(t *testing.T) {
	base := func() *v1alpha1.GitOpsCluster {
		g := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "fleet", Generation: 1, ResourceVersion: "10"}}
		g.Status.Principal = &v1alpha1.PrincipalEndpoint{Address: "principal.example.com", Port: 443}
		return g
	}
	cases := []struct {
		name           string
		before, change func(*v1alpha1.GitOpsCluster)
		wakes          bool
	}{
		{"spec changed", nil, func(g *v1alpha1.GitOpsCluster) { g.Generation = 2 }, true},
		{"another principal address", nil, func(g *v1alpha1.GitOpsCluster) { g.Status.Principal.Address = "principal-2.example.com" }, true},
		{"another principal port", nil, func(g *v1alpha1.GitOpsCluster) { g.Status.Principal.Port = 8443 }, true},
		{"principal address found", func(g *v1alpha1.GitOpsCluster) { g.Status.Principal = nil }, func(*v1alpha1.GitOpsCluster) {}, true},
		{"principal address lost", nil, func(g *v1alpha1.GitOpsCluster) { g.Status.Principal = nil }, true},
		{"a condition written", nil, func(g *v1alpha1.GitOpsCluster) {
			g.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
		}, false},
		{"counts written", nil, func(g *v1alpha1.GitOpsCluster) { g.Status.RevokedAgents = 3 }, false},
	}
	wakes := samePrincipalWakes()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, updated := base(), base()
			if c.before != nil {
				c.before(old)
			}
			updated.ResourceVersion = "11"
			c.change(updated)
			if got := wakes.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated}); got != c.wakes {
				t.Errorf("wakes the principal's others: %v, want %v", got, c.wakes)
			}
		})
	}
}
