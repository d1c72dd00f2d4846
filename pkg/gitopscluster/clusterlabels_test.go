package gitopscluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

func setManagedClusterLabels(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	mc := &clusterv1.ManagedCluster{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, mc); err != nil {
		t.Fatal(err)
	}
	mc.Labels = labels
	if err := k8s.Update(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
}

func agentSecret(t *testing.T, ns, cluster string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: agentsecret.Name(cluster)}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func labelsAre(s *corev1.Secret, want map[string]string, absent ...string) error {
	for k, v := range want {
		if s.Labels[k] != v {
			return fmt.Errorf("%s: label %s = %q, want %q (labels %v)", s.Name, k, s.Labels[k], v, s.Labels)
		}
	}
	for _, k := range absent {
		if _, ok := s.Labels[k]; ok {
			return fmt.Errorf("%s: label %s still there", s.Name, k)
		}
	}
	return nil
}

// The agents' cluster secrets carry their ManagedCluster's labels, so an ApplicationSet cluster
// generator on the hub can select agents by them; the project's and Argo CD's own labels win.
func TestAgentClusterSecretsCarryManagedClusterLabels(t *testing.T) {
	ns := "agent-labels"
	createNamespace(t, ns)
	createManagedClusters(t, "al-1", "al-2")
	setManagedClusterLabels(t, "al-1", map[string]string{
		"env": "prod", "region": "eu",
		v1alpha1.LabelAgentName:  "evil",
		v1alpha1.LabelSecretType: "repository",
		v1alpha1.LabelOwnerName:  "evil",
		v1alpha1.LabelManagedBy:  "evil",
	})
	setManagedClusterLabels(t, "al-2", map[string]string{"env": "dev"})
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 0, "al-1", "al-2")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	waitClusterSecrets(t, ns, "cluster-al-1", "cluster-al-2")

	own := map[string]string{
		v1alpha1.LabelAgentName:  "al-1",
		v1alpha1.LabelSecretType: "cluster",
		v1alpha1.LabelOwnerName:  "fleet",
		v1alpha1.LabelManagedBy:  v1alpha1.ManagedByValue,
	}
	eventually(t, "al-1 labels", func() error {
		return labelsAre(agentSecret(t, ns, "al-1"), merge(own, map[string]string{"env": "prod", "region": "eu"}))
	})
	eventually(t, "al-2 labels", func() error { return labelsAre(agentSecret(t, ns, "al-2"), map[string]string{"env": "dev"}) })
	other := agentSecret(t, ns, "al-2").ResourceVersion

	// A label change is one write, to that cluster's secret; the certificate is not re-issued.
	before := agentSecret(t, ns, "al-1")
	writesBefore, err := testenv.QuietWrites(context.Background(), env.Config, 2*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	setManagedClusterLabels(t, "al-1", map[string]string{"env": "staging", v1alpha1.LabelAgentName: "evil"})
	eventually(t, "al-1 relabelled", func() error {
		return labelsAre(agentSecret(t, ns, "al-1"), merge(own, map[string]string{"env": "staging"}), "region")
	})
	writesAfter, err := testenv.QuietWrites(context.Background(), env.Config, 2*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The test's own ManagedCluster update, and one Secret update.
	if diff := testenv.DiffWrites(writesBefore, writesAfter); len(diff) != 2 || diff["managedclusters"] != 1 || diff["secrets"] != 1 {
		t.Fatalf("writes for one label change: %v, want managedclusters 1 (the test's) and secrets 1", diff)
	}
	after := agentSecret(t, ns, "al-1")
	if err := labelsAre(after, merge(own, map[string]string{"env": "staging"}), "region"); err != nil {
		t.Fatalf("labels reverted: %v", err)
	}
	if string(after.Data["config"]) != string(before.Data["config"]) {
		t.Fatal("a label change re-issued the cluster secret's certificate")
	}
	if got := agentSecret(t, ns, "al-2").ResourceVersion; got != other {
		t.Fatalf("another cluster's secret was rewritten (%s -> %s)", other, got)
	}

	// A copied label edited by hand on the secret is put back from the ManagedCluster.
	edited := agentSecret(t, ns, "al-1")
	edited.Labels["env"] = "by-hand"
	if err := k8s.Update(context.Background(), edited); err != nil {
		t.Fatal(err)
	}
	eventually(t, "al-1 label restored", func() error {
		return labelsAre(agentSecret(t, ns, "al-1"), map[string]string{"env": "staging"})
	})
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
