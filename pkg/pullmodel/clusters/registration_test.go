package clusters_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/clusterlabels"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/clusters"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

func secretHas(ns, name string, labels map[string]string, absent ...string) func() error {
	return func() error {
		s, err := getSecret(ns, name)
		if err != nil {
			return err
		}
		for k, v := range labels {
			if s.Labels[k] != v {
				return fmt.Errorf("label %s = %q, want %q (labels %v)", k, s.Labels[k], v, s.Labels)
			}
		}
		for _, k := range absent {
			if _, ok := s.Labels[k]; ok {
				return fmt.Errorf("label %s still there: %v", k, s.Labels)
			}
		}
		return nil
	}
}

func gone(ns, name string) func() error {
	return func() error {
		if _, err := getSecret(ns, name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("secret %s/%s still there (err %v)", ns, name, err)
		}
		return nil
	}
}

func TestRegistrationWritesClusterSecretsWithManagedClusterLabels(t *testing.T) {
	ns := "argocd-reg1"
	createNamespace(t, ns)
	createManagedCluster(t, "reg1-a", map[string]string{"env": "prod", "cloud": "aws", "argocd.argoproj.io/secret-type": "spoof"})
	createManagedCluster(t, "reg1-b", map[string]string{"env": "dev"})
	createPlacement(t, ns, "all")
	setDecisions(t, ns, "all", "reg1-a", "reg1-b")
	createRegistration(t, ns, "fleet", "all")

	eventually(t, "secret of reg1-a", secretHas(ns, "reg1-a-cluster-secret", map[string]string{
		"argocd.argoproj.io/secret-type":                 "cluster",
		"apps.open-cluster-management.io/acm-cluster":    "true",
		"apps.open-cluster-management.io/cluster-name":   "reg1-a",
		"apps.open-cluster-management.io/cluster-server": "reg1-a-control-plane",
		"env":   "prod",
		"cloud": "aws",
	}))
	eventually(t, "secret of reg1-b", secretHas(ns, "reg1-b-cluster-secret", map[string]string{"env": "dev"}))
	reg := readyIs(t, ns, "fleet", metav1.ConditionTrue, clusters.ReasonRegistered)
	if reg.Status.RegisteredClusters != 2 {
		t.Fatalf("registeredClusters = %d, want 2", reg.Status.RegisteredClusters)
	}
	a, _ := getSecret(ns, "reg1-a-cluster-secret")
	if string(a.Data["name"]) != "reg1-a" || string(a.Data["server"]) != "https://reg1-a-control-plane" {
		t.Fatalf("data = %v", a.Data)
	}
	b, _ := getSecret(ns, "reg1-b-cluster-secret")

	// Idle: nothing is written.
	ctx := context.Background()
	w0, err := testenv.QuietWrites(ctx, env.Config, time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	w1, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if diff := testenv.DiffWrites(w0, w1); len(diff) > 0 {
		t.Fatalf("writes while idle: %v", diff)
	}

	// A label change on one ManagedCluster rewrites that cluster's secret only: one write.
	setClusterLabels(t, "reg1-a", map[string]string{"env": "staging", "argocd.argoproj.io/secret-type": "spoof"})
	eventually(t, "reg1-a relabelled", secretHas(ns, "reg1-a-cluster-secret", map[string]string{"env": "staging", "argocd.argoproj.io/secret-type": "cluster"}, "cloud"))
	w2, err := testenv.QuietWrites(ctx, env.Config, 2*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if diff := testenv.DiffWrites(w1, w2); len(diff) != 2 || diff["managedclusters"] != 1 || diff["secrets"] != 1 {
		t.Fatalf("writes for one label change: %v, want managedclusters 1 (the test's) and secrets 1", diff)
	}
	b2, _ := getSecret(ns, "reg1-b-cluster-secret")
	if b2.ResourceVersion != b.ResourceVersion {
		t.Fatalf("the other cluster's secret was rewritten (%s -> %s)", b.ResourceVersion, b2.ResourceVersion)
	}
	a2, _ := getSecret(ns, "reg1-a-cluster-secret")
	if a2.Annotations[clusterlabels.AnnotationCopied] != "env" {
		t.Fatalf("copied-labels record = %q", a2.Annotations[clusterlabels.AnnotationCopied])
	}
	// A copied label edited by hand is put back from the ManagedCluster.
	a2.Labels["env"] = "by-hand"
	if err := k8s.Update(context.Background(), a2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "reg1-a label restored", secretHas(ns, "reg1-a-cluster-secret", map[string]string{"env": "staging"}))

	// A cluster leaving the Placement loses its secret.
	setDecisions(t, ns, "all", "reg1-a")
	eventually(t, "reg1-b unregistered", gone(ns, "reg1-b-cluster-secret"))
	readyIs(t, ns, "fleet", metav1.ConditionTrue, clusters.ReasonRegistered)

	// Deleting the registration removes its secrets.
	if err := k8s.Delete(context.Background(), &v1alpha1.ArgoCDClusterRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "reg1-a unregistered", gone(ns, "reg1-a-cluster-secret"))
	eventually(t, "registration gone", func() error {
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "fleet"}, &v1alpha1.ArgoCDClusterRegistration{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}

func TestRegistrationNeverOverwritesForeignSecretsAndKeepsSecretsWhileSelectionUnknown(t *testing.T) {
	ns := "argocd-reg2"
	createNamespace(t, ns)
	createManagedCluster(t, "reg2-a", map[string]string{"env": "prod"})
	createManagedCluster(t, "reg2-b", nil)
	// Someone's own cluster secret under the name a registration would use.
	foreign := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reg2-b-cluster-secret", Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster"}},
		StringData: map[string]string{"name": "reg2-b", "server": "https://real.example:6443"},
	}
	if err := k8s.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", "reg2-a", "reg2-b", "reg2-not-yet")
	createRegistration(t, ns, "r", "p")

	eventually(t, "secret of reg2-a", secretHas(ns, "reg2-a-cluster-secret", map[string]string{"env": "prod"}))
	readyIs(t, ns, "r", metav1.ConditionFalse, clusters.ReasonSecretConflict)
	f, _ := getSecret(ns, "reg2-b-cluster-secret")
	if string(f.Data["server"]) != "https://real.example:6443" || f.Labels[clusters.LabelRegistration] != "" {
		t.Fatalf("foreign secret was touched: labels %v, server %s", f.Labels, f.Data["server"])
	}
	// The foreign secret goes: the cluster is registered; the missing ManagedCluster is reported.
	if err := k8s.Delete(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	readyIs(t, ns, "r", metav1.ConditionFalse, clusters.ReasonClustersPending)
	eventually(t, "secret of reg2-b", secretHas(ns, "reg2-b-cluster-secret", map[string]string{clusters.LabelRegistration: "r"}))
	createManagedCluster(t, "reg2-not-yet", map[string]string{"late": "yes"})
	eventually(t, "secret of the late cluster", secretHas(ns, "reg2-not-yet-cluster-secret", map[string]string{"late": "yes"}))
	readyIs(t, ns, "r", metav1.ConditionTrue, clusters.ReasonRegistered)

	// The decision page disappears (a Placement being re-created): nothing is removed.
	if err := k8s.DeleteAllOf(context.Background(), &clusterv1beta1.PlacementDecision{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	readyIs(t, ns, "r", metav1.ConditionTrue, clusters.ReasonSelectionUnknown)
	for _, c := range []string{"reg2-a", "reg2-b", "reg2-not-yet"} {
		if _, err := getSecret(ns, clusters.SecretName(c)); err != nil {
			t.Fatalf("secret of %s removed while the selection was unknown: %v", c, err)
		}
	}
}
