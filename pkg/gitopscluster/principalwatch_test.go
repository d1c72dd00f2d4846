package gitopscluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// TestPrincipalDeploymentStatusChurnWakesNoGitOpsCluster: the principal Deployment's status
// changes with every pod event; only a change of its pod template (the restart stamp the
// reconciler writes, or a person's edit) may wake the GitOpsClusters of its namespace.
func TestPrincipalDeploymentStatusChurnWakesNoGitOpsCluster(t *testing.T) {
	ctx := context.Background()
	ns := "principal-churn"
	dep := principalWithGitOpsCluster(t, ns, withAddress("p.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, "")
	count := func() int { return reconciles.get("gitopscluster", ns, "fleet") }
	// Settled: no reconcile of it for two seconds (a GitOpsCluster that never settles fails).
	waitSettled(t, count, 2*time.Second)
	before := count()

	for i := int32(1); i <= 5; i++ {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			t.Fatal(err)
		}
		d.Status.ObservedGeneration, d.Status.Replicas, d.Status.ReadyReplicas = d.Generation, 1, i%2
		if err := k8s.Status().Update(ctx, d); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	if n := count() - before; n != 0 {
		t.Errorf("5 status-only updates of the principal Deployment reconciled its GitOpsCluster %d time(s), want 0", n)
	}

	// The watch is there: a pod template edit wakes it.
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Template.Annotations = map[string]string{"example.com/edited": "yes"}
	if err := k8s.Patch(ctx, d, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a pod template edit reconciles the GitOpsCluster", func() error {
		if count() == before {
			return fmt.Errorf("not reconciled")
		}
		return nil
	})
}
