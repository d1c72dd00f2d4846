package clusters_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/clusters"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// A cluster joining writes the registration's status once, and raises no second Event: the
// pass its own cluster-secret write wakes must not work from a copy older than that status
// write.
func TestJoinWritesRegistrationStatusOnce(t *testing.T) {
	ctx := context.Background()
	ns := "argocd-join-once"
	createNamespace(t, ns)
	for _, c := range []string{"rj-1", "rj-2", "rj-3", "rj-4"} {
		createManagedCluster(t, c, map[string]string{"env": "prod"})
	}
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", "rj-1")
	createRegistration(t, ns, "fleet", "p")
	readyIs(t, ns, "fleet", metav1.ConditionTrue, clusters.ReasonRegistered)

	joined := []string{"rj-1"}
	for _, c := range []string{"rj-2", "rj-3", "rj-4"} {
		before, err := testenv.QuietWrites(ctx, env.Config, 2*time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		joined = append(joined, c)
		setDecisions(t, ns, "p", joined...)
		eventually(t, c+" registered", secretHas(ns, c+"-cluster-secret", map[string]string{"env": "prod"}))
		after, err := testenv.QuietWrites(ctx, env.Config, 2*time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		diff := testenv.DiffWrites(before, after)
		if diff["argocdclusterregistrations/status"] != 1 || diff["secrets"] != 1 {
			t.Errorf("%s joining: %v API writes, want one status write and one secret", c, diff)
		}
	}
}
