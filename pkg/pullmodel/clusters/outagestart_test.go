package clusters

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
)

// TestRecordedStartCannotExtendTheGrace: the start recorded on the hub Secret can be rewritten
// by whoever may write Secrets there; a recent value must not keep the secret past the grace
// that OCM's taint time gives.
func TestRecordedStartCannotExtendTheGrace(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r := &Reconciler{Grace: time.Hour}
	tainted := now.Add(-2 * time.Hour)
	mc := &clusterv1.ManagedCluster{Spec: clusterv1.ManagedClusterSpec{Taints: []clusterv1.Taint{{
		Key: clusterv1.ManagedClusterTaintUnreachable, Effect: clusterv1.TaintEffectNoSelect, TimeAdded: metav1.NewTime(tainted),
	}}}}
	pl := &clusterv1beta1.Placement{}
	if what, _ := r.outageState(mc, pl, now.Add(-time.Minute), now); what != departureGraceEnded {
		t.Errorf("tainted 2h ago with a 1h grace, a start rewritten to a minute ago: %v, want the grace ended", what)
	}
	if what, until := r.outageState(mc, pl, tainted.Add(-10*time.Minute), now); what != departureGraceEnded || !until.IsZero() {
		t.Errorf("an earlier recorded start: %v %v, want the grace ended", what, until)
	}
	mc.Spec.Taints[0].TimeAdded = metav1.NewTime(now.Add(-10 * time.Minute))
	if what, until := r.outageState(mc, pl, now.Add(-5*time.Minute), now); what != departureKeep || !until.Equal(now.Add(50*time.Minute)) {
		t.Errorf("tainted 10 minutes ago: %v until %v, want kept until the taint time plus the grace", what, until)
	}
}
