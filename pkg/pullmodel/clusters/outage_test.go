package clusters_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/clusters"
)

// grace is the suite manager's --pull-model-registration-grace.
const grace = 10 * time.Second

// TestRegistrationKeepsAClusterThroughAnOutage: a cluster that OCM's hub taints unreachable,
// and that its Placement then drops, keeps its cluster secret (so ApplicationSets keep its
// Applications) for the registration grace, and loses it once the grace is over; one that comes
// back within the grace keeps the same secret; a healthy cluster dropped by a Placement edit
// loses its secret at once.
func TestRegistrationKeepsAClusterThroughAnOutage(t *testing.T) {
	ns := "argocd-outage"
	createNamespace(t, ns)
	for _, c := range []string{"outage-down", "outage-back", "outage-healthy"} {
		createManagedCluster(t, c, nil)
		setAvailable(t, c, metav1.ConditionTrue)
	}
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", "outage-down", "outage-back", "outage-healthy")
	createRegistration(t, ns, "r", "p")
	uids := map[string]types.UID{}
	for _, c := range []string{"outage-down", "outage-back", "outage-healthy"} {
		eventually(t, "secret of "+c, secretHas(ns, clusters.SecretName(c), nil))
		s, _ := getSecret(ns, clusters.SecretName(c))
		uids[c] = s.UID
	}
	readyIs(t, ns, "r", metav1.ConditionTrue, clusters.ReasonRegistered)

	// Two clusters' leases lapse: OCM's hub marks them Unknown and taints them unreachable, then
	// the Placement, which does not tolerate the taint, drops them.
	tainted := time.Now()
	for _, c := range []string{"outage-down", "outage-back"} {
		setAvailable(t, c, metav1.ConditionUnknown)
		setTaints(t, c, clusterv1.Taint{Key: clusterv1.ManagedClusterTaintUnreachable, Effect: clusterv1.TaintEffectNoSelect, TimeAdded: metav1.NewTime(tainted)})
	}
	setDecisions(t, ns, "p", "outage-healthy")
	reg := readyIs(t, ns, "r", metav1.ConditionTrue, clusters.ReasonKeptThroughOutage)
	if reg.Status.RegisteredClusters != 3 {
		t.Errorf("registeredClusters = %d during the outage, want 3", reg.Status.RegisteredClusters)
	}
	for _, c := range []string{"outage-down", "outage-back"} {
		s, err := getSecret(ns, clusters.SecretName(c))
		if err != nil {
			t.Fatalf("%s: secret deleted as its Placement dropped it during an outage: %v", c, err)
		}
		if s.UID != uids[c] || s.Annotations[clusters.AnnotationKeptSince] == "" {
			t.Fatalf("%s: secret uid %s (was %s), annotations %v", c, s.UID, uids[c], s.Annotations)
		}
	}

	// One comes back: OCM removes the taint, the Placement selects it again; the secret it had
	// stays, without the record of the outage.
	setTaints(t, "outage-back")
	setAvailable(t, "outage-back", metav1.ConditionTrue)
	setDecisions(t, ns, "p", "outage-healthy", "outage-back")
	eventually(t, "outage-back's secret without the outage record", func() error {
		s, err := getSecret(ns, clusters.SecretName("outage-back"))
		if err != nil {
			return err
		}
		if s.UID != uids["outage-back"] {
			return fmt.Errorf("secret re-created (uid %s, was %s)", s.UID, uids["outage-back"])
		}
		if v, ok := s.Annotations[clusters.AnnotationKeptSince]; ok {
			return fmt.Errorf("still recorded as kept since %s", v)
		}
		return nil
	})

	// A healthy cluster dropped by a Placement edit loses its secret at once.
	dropped := time.Now()
	setDecisions(t, ns, "p", "outage-back")
	eventually(t, "the healthy cluster's secret deleted", gone(ns, clusters.SecretName("outage-healthy")))
	if took := time.Since(dropped); took > grace/2 {
		t.Errorf("a healthy cluster dropped by its Placement lost its secret after %s, not at once (grace %s)", took, grace)
	}

	// The cluster still down keeps its secret until the grace, counted from the taint, is over.
	for time.Since(tainted) < grace-time.Second {
		if _, err := getSecret(ns, clusters.SecretName("outage-down")); err != nil {
			t.Fatalf("outage-down's secret went %s after the taint, within the grace of %s: %v", time.Since(tainted).Round(time.Millisecond), grace, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	eventually(t, "outage-down's secret deleted after the grace", gone(ns, clusters.SecretName("outage-down")))
	if took := time.Since(tainted); took > grace+10*time.Second {
		t.Errorf("outage-down's secret went %s after the taint, long after the grace of %s", took, grace)
	}
	readyIs(t, ns, "r", metav1.ConditionTrue, clusters.ReasonRegistered)
	if s, err := getSecret(ns, clusters.SecretName("outage-back")); err != nil || s.UID != uids["outage-back"] {
		t.Errorf("outage-back's secret changed: %v", err)
	}
}

// setTaints replaces a ManagedCluster's taints, as OCM's hub taint controller does.
func setTaints(t *testing.T, name string, taints ...clusterv1.Taint) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &clusterv1.ManagedCluster{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, mc); err != nil {
			return err
		}
		mc.Spec.Taints = taints
		return k8s.Update(context.Background(), mc)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setAvailable sets a ManagedCluster's Available condition, as OCM's agent and hub do.
func setAvailable(t *testing.T, name string, status metav1.ConditionStatus) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &clusterv1.ManagedCluster{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, mc); err != nil {
			return err
		}
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: clusterv1.ManagedClusterConditionAvailable, Status: status, Reason: "Test", Message: "set by the test"})
		return k8s.Status().Update(context.Background(), mc)
	})
	if err != nil {
		t.Fatal(err)
	}
}
