package clusters

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// An outage must not cost a cluster its registration. OCM's registration controller on the hub
// taints a cluster whose lease lapsed (unreachable, or unavailable) with effect NoSelect, and a
// Placement that does not tolerate the taint drops the cluster from its decisions at once.
// Deleting its secret then would make ApplicationSets delete its Applications, and OCM's work
// agent the workloads when the cluster is back. So the secret of a cluster that left while so
// tainted is kept for the hub admin's grace (--pull-model-registration-grace), counted from
// when the manager first saw it so (or from the taint, if earlier), and recorded on the secret
// itself so that a restart does not start the count again. A cluster dropped while healthy
// (a Placement edit, a label change) loses its secret as before.
//
// Trust: the taint keys are OCM's own, written by its hub controller; a cluster's own identity
// may update its ManagedCluster too (OCM v1.2's RBAC grants it update on it, and no webhook
// stops it from adding these taints), and may stop renewing its lease, so a cluster can always
// look unreachable. What it gains is bounded: its secret stays at most the grace after the
// manager saw it leave, a time the cluster cannot move, and only if a person dropped it during
// such an outage.

// AnnotationKeptSince on a registration's secret records when the manager began keeping it
// through an outage (RFC 3339); it goes when the cluster is selected again.
const AnnotationKeptSince = "argocd-agent-addon.open-cluster-management.io/outage-kept-since"

// Reasons of the Events and of the Ready condition about outages.
const (
	// ReasonKeptThroughOutage: selected clusters are registered and some that left while
	// unreachable are kept until their grace ends.
	ReasonKeptThroughOutage = "KeptThroughOutage"
	// ReasonOutageGraceEnded: a kept cluster stayed out of the Placement past the grace.
	ReasonOutageGraceEnded = "OutageGraceEnded"
	// ReasonClusterReturned: a kept cluster is selected again.
	ReasonClusterReturned = "ClusterReturned"
)

// returnSettle is how long a kept cluster that is available again may stay out of the
// decisions before its departure counts: OCM removes the taint, then the Placement selects
// the cluster again, one after the other.
const returnSettle = time.Minute

// outageTaints are the taints OCM's hub puts on a cluster whose lease lapsed.
var outageTaints = []string{clusterv1.ManagedClusterTaintUnreachable, clusterv1.ManagedClusterTaintUnavailable}

// outageTaint returns the NoSelect outage taint of mc that pl does not tolerate, if any. A
// Placement that tolerates it (with or without tolerationSeconds) did not drop the cluster for
// it, or dropped it when its author asked: no grace then.
func outageTaint(mc *clusterv1.ManagedCluster, pl *clusterv1beta1.Placement) *clusterv1.Taint {
	if mc == nil || mc.DeletionTimestamp != nil {
		return nil
	}
	for i := range mc.Spec.Taints {
		t := &mc.Spec.Taints[i]
		if t.Effect != clusterv1.TaintEffectNoSelect || !isOutageKey(t.Key) || tolerated(t, pl.Spec.Tolerations) {
			continue
		}
		return t
	}
	return nil
}

func isOutageKey(k string) bool {
	for _, o := range outageTaints {
		if k == o {
			return true
		}
	}
	return false
}

// tolerated matches a taint as OCM's placement scheduler does, leaving out tolerationSeconds.
func tolerated(t *clusterv1.Taint, tolerations []clusterv1beta1.Toleration) bool {
	for _, tol := range tolerations {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Key != "" && tol.Key != t.Key {
			continue
		}
		switch tol.Operator {
		case clusterv1beta1.TolerationOpExists:
			return true
		case "", clusterv1beta1.TolerationOpEqual:
			if tol.Value == t.Value {
				return true
			}
		}
	}
	return false
}

// keptSince reads AnnotationKeptSince; a value that does not parse or lies ahead is no record.
func keptSince(s *corev1.Secret, now time.Time) (time.Time, bool) {
	v, ok := s.Annotations[AnnotationKeptSince]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil || t.After(now) {
		return time.Time{}, false
	}
	return t, true
}

// kept is a departed cluster whose secret stays until a time.
type kept struct {
	cluster string
	until   time.Time
}

// departure is what to do with the secret of a cluster the selection no longer holds.
type departure int

const (
	departureDelete departure = iota
	departureKeep
	departureGraceEnded
)

// outageState decides, from mc (nil when gone), whether the secret s of a departed cluster is
// kept, and until when; since is the recorded start of the keeping, zero when none.
func (r *Reconciler) outageState(mc *clusterv1.ManagedCluster, pl *clusterv1beta1.Placement, since time.Time, now time.Time) (departure, time.Time) {
	if r.Grace <= 0 {
		return departureDelete, time.Time{}
	}
	if t := outageTaint(mc, pl); t != nil {
		// The earlier of the recorded start and OCM's taint time: the record sits on a hub Secret
		// that others may write, so it can only bring the end closer, never push it away.
		start := now
		if !since.IsZero() {
			start = since
		}
		if !t.TimeAdded.IsZero() && t.TimeAdded.Time.Before(start) {
			start = t.TimeAdded.Time
		}
		until := start.Add(r.Grace)
		if now.Before(until) {
			return departureKeep, until
		}
		return departureGraceEnded, time.Time{}
	}
	// Kept before and available again: the Placement has a moment to select it again.
	if since.IsZero() || mc == nil || mc.DeletionTimestamp != nil {
		return departureDelete, time.Time{}
	}
	graceEnd := since.Add(r.Grace)
	c := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable)
	if c == nil || c.Status != metav1.ConditionTrue {
		// Not available, yet not tainted (OCM's taint controller is about to): still the outage.
		if now.Before(graceEnd) {
			return departureKeep, graceEnd
		}
		return departureGraceEnded, time.Time{}
	}
	until := c.LastTransitionTime.Add(returnSettle)
	if graceEnd.Before(until) {
		until = graceEnd
	}
	if now.Before(until) {
		return departureKeep, until
	}
	return departureDelete, time.Time{}
}

// keepThroughOutage decides about the secret s of cluster, which the cached selection no
// longer holds. The cache may be behind OCM's taint (the decision can arrive first), so a
// deletion within the grace is confirmed by a live read of the ManagedCluster; keeping needs
// no confirmation. It records the start of the keeping on the secret.
func (r *Reconciler) keepThroughOutage(ctx context.Context, reg *v1alpha1.ArgoCDClusterRegistration, pl *clusterv1beta1.Placement, cluster string, s *corev1.Secret, now time.Time) (departure, time.Time, error) {
	since, recorded := keptSince(s, now)
	mc := &clusterv1.ManagedCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
		if !apierrors.IsNotFound(err) {
			return departureDelete, time.Time{}, err
		}
		mc = nil
	}
	what, until := r.outageState(mc, pl, since, now)
	if what == departureDelete && r.Grace > 0 {
		live := &clusterv1.ManagedCluster{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: cluster}, live); err != nil {
			if !apierrors.IsNotFound(err) {
				return departureDelete, time.Time{}, err
			}
			live = nil
		}
		what, until = r.outageState(live, pl, since, now)
	}
	if what != departureKeep || recorded {
		return what, until, nil
	}
	start := until.Add(-r.Grace)
	u := s.DeepCopy()
	if u.Annotations == nil {
		u.Annotations = map[string]string{}
	}
	u.Annotations[AnnotationKeptSince] = start.UTC().Format(time.RFC3339)
	if err := r.Client.Patch(ctx, u, client.MergeFrom(s)); err != nil {
		if apierrors.IsNotFound(err) {
			return departureDelete, time.Time{}, nil
		}
		return departureDelete, time.Time{}, fmt.Errorf("recording the outage on cluster secret %s: %w", s.Name, err)
	}
	log.FromContext(ctx).Info("keeping the cluster secret of a cluster that left its Placement while unreachable",
		"cluster", cluster, "placement", pl.Name, "until", until.UTC().Format(time.RFC3339))
	r.event(reg, corev1.EventTypeNormal, ReasonKeptThroughOutage, "Unregister",
		"cluster %s left Placement %s while OCM marks it unreachable or unavailable; its cluster secret is kept until %s (--pull-model-registration-grace %s), so its Applications stay",
		cluster, pl.Name, until.UTC().Format(time.RFC3339), r.Grace)
	return what, until, nil
}
