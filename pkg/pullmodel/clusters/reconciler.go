package clusters

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/clusterlabels"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/finalizers"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownwrites"
)

// Reconciler keeps the cluster secrets of ArgoCDClusterRegistrations.
type Reconciler struct {
	// Client reads through the manager's cache.
	Client client.Client
	// APIReader reads past the cache; a departure is confirmed with it before a secret goes.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// ManagedNamespaces are the namespaces whose Secrets the manager may write; empty means all.
	ManagedNamespaces []string
	// Grace is how long the secret of a cluster that left its Placement while OCM marks it
	// unreachable or unavailable is kept (see outage.go); 0 removes it at once.
	Grace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	statusWrites ownwrites.Tracker
}

// Reconcile brings one registration's cluster secrets in line with its Placement.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	reg := &v1alpha1.ArgoCDClusterRegistration{}
	if err := r.Client.Get(ctx, req.NamespacedName, reg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A pass woken by this manager's own status write works from the written status.
	if err := r.statusWrites.Fresh(ctx, r.Client, reg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !reg.DeletionTimestamp.IsZero() {
		r.statusWrites.Forget(reg.UID)
		return ctrl.Result{}, r.reconcileDelete(ctx, reg)
	}
	if !r.managed(reg.Namespace) {
		// Nothing is ever written there, so no finalizer either: deleting it must not wait on
		// Secrets the manager may not read.
		return ctrl.Result{}, r.setStatus(ctx, reg, r.notReady(reg, ReasonNamespaceNotManaged, fmt.Sprintf(
			"namespace %s is not one of the manager's managed namespaces (%s), so it may not write Secrets there; add it to the chart's managedNamespaces",
			reg.Namespace, strings.Join(r.ManagedNamespaces, ","))), 0)
	}
	if !controllerutil.ContainsFinalizer(reg, Finalizer) {
		if err := finalizers.Add(ctx, r.Client, reg, Finalizer); err != nil {
			return ctrl.Result{}, err
		}
	}
	cond, count, recheck, err := r.reconcileNormal(ctx, reg)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.setStatus(ctx, reg, cond, count); err != nil {
		return ctrl.Result{}, err
	}
	if cond.Reason == ReasonSecretConflict {
		// Someone else's Secret is not always in the cache (without managed namespaces only
		// the project's own are), so its removal may come with no event: look again.
		recheck = minPositive(recheck, conflictRecheck)
	}
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// minPositive is the smaller of two waits, where 0 means none.
func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// conflictRecheck is how often a registration blocked by someone else's Secret looks again.
const conflictRecheck = 10 * time.Second

// reconcileNormal writes the secrets of the selected clusters and deletes those of clusters
// that have left. It returns the Ready condition, the number of secrets there are and when to
// look again for secrets kept through an outage (0: no need).
func (r *Reconciler) reconcileNormal(ctx context.Context, reg *v1alpha1.ArgoCDClusterRegistration) (metav1.Condition, int32, time.Duration, error) {
	owned, err := r.ownedSecrets(ctx, reg)
	if err != nil {
		return metav1.Condition{}, 0, 0, err
	}
	count := int32(len(owned))
	pl := &clusterv1beta1.Placement{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: reg.Namespace, Name: reg.Spec.PlacementRef.Name}, pl); err != nil {
		if apierrors.IsNotFound(err) {
			// The Placement may be being re-created: existing registrations stay.
			return r.notReady(reg, ReasonPlacementNotFound, fmt.Sprintf(
				"Placement %s/%s does not exist; create it, or fix spec.placementRef (existing cluster secrets are kept)",
				reg.Namespace, reg.Spec.PlacementRef.Name)), count, 0, nil
		}
		return metav1.Condition{}, 0, 0, err
	}
	selected, pages, err := ownership.SelectedClustersAndPages(ctx, r.Client, reg.Namespace, pl.Name)
	if err != nil {
		return metav1.Condition{}, 0, 0, err
	}
	out, err := r.registerSelected(ctx, reg, pl.Name, selected, owned)
	if err != nil {
		return metav1.Condition{}, 0, 0, err
	}
	count += int32(out.created)
	unknown := ownership.SelectionUnknown(pl, selected, pages)
	var recheck time.Duration
	if unknown == "" {
		removed, errs, err := r.removeDepartures(ctx, reg, pl, selected, owned, &out)
		if err != nil {
			return metav1.Condition{}, 0, 0, err
		}
		count -= int32(removed)
		out.errs = append(out.errs, errs...)
		for _, k := range out.kept {
			// A second late, so the grace has surely ended when the pass runs.
			recheck = minPositive(recheck, k.until.Sub(r.now())+time.Second)
		}
	}
	if err := errors.Join(out.errs...); err != nil {
		return metav1.Condition{}, 0, 0, err
	}
	return readiness(reg, pl.Name, out, unknown, count), count, recheck, nil
}

// registration is what a pass over the selected clusters did and found.
type registration struct {
	created                     int
	conflicts, pending, invalid []string
	// kept are departed clusters whose secrets stay through an outage, sorted by name.
	kept []kept
	errs []error
}

// registerSelected creates or updates the secret of every selected cluster; one cluster's
// failure is recorded and the others go on. The returned error is one that stops the pass.
func (r *Reconciler) registerSelected(ctx context.Context, reg *v1alpha1.ArgoCDClusterRegistration, placement string, selected sets.Set[string], owned map[string]*corev1.Secret) (registration, error) {
	var out registration
	for _, cluster := range sets.List(selected) {
		if len(validation.IsDNS1123Subdomain(SecretName(cluster))) > 0 {
			out.invalid = append(out.invalid, cluster)
			continue
		}
		mc := &clusterv1.ManagedCluster{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
			if !apierrors.IsNotFound(err) {
				return out, err
			}
			out.pending = append(out.pending, cluster)
			continue
		}
		desired := desiredSecret(reg, cluster, mc.Labels)
		live := owned[cluster]
		if live == nil {
			other := &corev1.Secret{}
			err := r.Client.Get(ctx, client.ObjectKeyFromObject(desired), other)
			switch {
			case err == nil:
				// Someone else's secret (made by hand, by OCM's GitOpsCluster or by another
				// registration): never overwritten.
				out.conflicts = append(out.conflicts, cluster)
				continue
			case !apierrors.IsNotFound(err):
				return out, err
			}
			if err := r.Client.Create(ctx, desired); err != nil {
				if apierrors.IsAlreadyExists(err) {
					// Without managed namespaces the cache holds only the project's own
					// Secrets: one it does not show, yet exists, is someone else's.
					out.conflicts = append(out.conflicts, cluster)
					continue
				}
				out.errs = append(out.errs, fmt.Errorf("creating cluster secret %s: %w", desired.Name, err))
				continue
			}
			out.created++
			continue
		}
		_, wasKept := live.Annotations[AnnotationKeptSince]
		if secretCurrent(live, desired) && !wasKept {
			continue
		}
		s := live.DeepCopy()
		s.Labels, s.Annotations, _ = clusterlabels.Apply(s.Labels, s.Annotations, mc.Labels)
		for k, v := range desired.Labels {
			s.Labels[k] = v
		}
		delete(s.Annotations, AnnotationKeptSince)
		s.Data, s.Type = desired.Data, desired.Type
		if err := r.Client.Update(ctx, s); err != nil {
			out.errs = append(out.errs, fmt.Errorf("updating cluster secret %s: %w", s.Name, err))
			continue
		}
		if wasKept {
			r.event(reg, corev1.EventTypeNormal, ReasonClusterReturned, "Register", "cluster %s is selected by Placement %s again; its cluster secret was kept through the outage", cluster, placement)
		}
	}
	return out, nil
}

// removeDepartures deletes the secrets of clusters the selection no longer holds, each only
// once a live read confirms it: a cluster can be in no page for a moment while OCM rewrites
// them, and removing a cluster secret makes ApplicationSets delete that cluster's
// Applications. A cluster that left during an outage keeps its secret for the grace; those go
// into out.kept. It returns how many it deleted and the per-cluster errors.
func (r *Reconciler) removeDepartures(ctx context.Context, reg *v1alpha1.ArgoCDClusterRegistration, pl *clusterv1beta1.Placement, selected sets.Set[string], owned map[string]*corev1.Secret, out *registration) (int, []error, error) {
	removed := 0
	var errs []error
	now := r.now()
	for _, cluster := range slices.Sorted(maps.Keys(owned)) {
		s := owned[cluster]
		if selected.Has(cluster) {
			continue
		}
		what, until, err := r.keepThroughOutage(ctx, reg, pl, cluster, s, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if what == departureKeep {
			out.kept = append(out.kept, kept{cluster: cluster, until: until})
			continue
		}
		still, err := ownership.SelectsLive(ctx, r.Client, r.APIReader, reg.Namespace, pl.Name, cluster)
		if err != nil {
			return removed, errs, err
		}
		if still {
			continue
		}
		if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting cluster secret %s: %w", s.Name, err))
			continue
		}
		removed++
		if what == departureGraceEnded {
			log.FromContext(ctx).Info("deleted the cluster secret of a cluster still out of its Placement after the registration grace", "cluster", cluster, "placement", pl.Name, "grace", r.Grace.String())
			r.event(reg, corev1.EventTypeWarning, ReasonOutageGraceEnded, "Unregister",
				"cluster %s stayed out of Placement %s, unreachable or unavailable, past the grace of %s (--pull-model-registration-grace); its cluster secret was deleted, so ApplicationSets remove its Applications", cluster, pl.Name, r.Grace)
			continue
		}
		r.event(reg, corev1.EventTypeNormal, "ClusterUnregistered", "Unregister", "cluster %s left Placement %s; its cluster secret was deleted", cluster, pl.Name)
	}
	return removed, errs, nil
}

// readiness is the Ready condition of a pass: the first problem in the order a person should
// fix them, else Ready with departures held back while the selection is unknown.
func readiness(reg *v1alpha1.ArgoCDClusterRegistration, placement string, out registration, unknown string, count int32) metav1.Condition {
	notReady := func(reason, msg string) metav1.Condition {
		return metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
	}
	switch {
	case len(out.conflicts) > 0:
		return notReady(ReasonSecretConflict, fmt.Sprintf(
			"Secret(s) %s already exist in %s and are not this registration's; delete or rename them to register these cluster(s)",
			summarize(out.conflicts, SecretName), reg.Namespace))
	case len(out.invalid) > 0:
		return notReady(ReasonClustersPending, fmt.Sprintf("cluster name(s) %s are too long for a Secret name", summarize(out.invalid, nil)))
	case len(out.pending) > 0:
		return notReady(ReasonClustersPending, fmt.Sprintf(
			"the Placement selects cluster(s) %s that have no ManagedCluster; they are registered once it exists", summarize(out.pending, nil)))
	case unknown != "":
		return metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonSelectionUnknown,
			Message: fmt.Sprintf("%d cluster(s) registered; departures wait: %s", count, unknown)}
	case len(out.kept) > 0:
		names := make([]string, len(out.kept))
		until := make(map[string]string, len(out.kept))
		for i, k := range out.kept {
			names[i] = k.cluster
			until[k.cluster] = k.cluster + " until " + k.until.UTC().Format(time.RFC3339)
		}
		return metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonKeptThroughOutage,
			Message: fmt.Sprintf("%d cluster(s) registered; cluster(s) %s left Placement %s while OCM marks them unreachable or unavailable, and their secrets are kept (--pull-model-registration-grace)",
				count, summarize(names, func(c string) string { return until[c] }), placement)}
	}
	return metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonRegistered,
		Message: fmt.Sprintf("%d cluster(s) of Placement %s registered with the Argo CD of namespace %s", count, placement, reg.Namespace)}
}

// reconcileDelete removes every secret of the registration, then its finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, reg *v1alpha1.ArgoCDClusterRegistration) error {
	if !controllerutil.ContainsFinalizer(reg, Finalizer) {
		return nil
	}
	if !r.managed(reg.Namespace) {
		// The namespace was dropped from the managed ones after secrets were written: they
		// can no longer be read or deleted by the manager and stay for a person to remove.
		r.event(reg, corev1.EventTypeWarning, ReasonNamespaceNotManaged, "Unregister",
			"namespace %s is no longer managed; its cluster secrets (label %s=%s) are left for you to delete", reg.Namespace, LabelRegistration, reg.Name)
		return finalizers.Remove(ctx, r.Client, reg, Finalizer)
	}
	// Past the cache: a secret created just before the deletion must not be left behind.
	var list corev1.SecretList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(reg.Namespace), client.MatchingLabels{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, LabelRegistration: reg.Name,
	}); err != nil {
		return err
	}
	for i := range list.Items {
		if err := r.Client.Delete(ctx, &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return finalizers.Remove(ctx, r.Client, reg, Finalizer)
}

// managed reports whether the manager may write Secrets in ns.
func (r *Reconciler) managed(ns string) bool {
	return len(r.ManagedNamespaces) == 0 || slices.Contains(r.ManagedNamespaces, ns)
}

// ownedSecrets returns the registration's secrets by cluster name, from the cache.
func (r *Reconciler) ownedSecrets(ctx context.Context, reg *v1alpha1.ArgoCDClusterRegistration) (map[string]*corev1.Secret, error) {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy, client.InNamespace(reg.Namespace), client.MatchingLabels{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, LabelRegistration: reg.Name,
	}); err != nil {
		return nil, err
	}
	out := make(map[string]*corev1.Secret, len(list.Items))
	for i := range list.Items {
		if c := string(list.Items[i].Data["name"]); c != "" {
			out[c] = &list.Items[i]
		}
	}
	return out, nil
}

func (r *Reconciler) notReady(reg *v1alpha1.ArgoCDClusterRegistration, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
}

// setStatus writes the status only when it changes; an Event goes with a Ready turning False
// or changing reason.
func (r *Reconciler) setStatus(ctx context.Context, reg *v1alpha1.ArgoCDClusterRegistration, cond metav1.Condition, count int32) error {
	cond.ObservedGeneration = reg.Generation
	old := meta.FindStatusCondition(reg.Status.Conditions, ConditionReady)
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message &&
		old.ObservedGeneration == cond.ObservedGeneration && reg.Status.RegisteredClusters == count && reg.Status.ObservedGeneration == reg.Generation {
		return nil
	}
	if cond.Status == metav1.ConditionFalse && (old == nil || old.Reason != cond.Reason || old.Status != cond.Status) {
		r.event(reg, corev1.EventTypeWarning, cond.Reason, "Register", "%s", cond.Message)
	}
	patch := client.MergeFrom(reg.DeepCopy())
	before := reg.ResourceVersion
	meta.SetStatusCondition(&reg.Status.Conditions, cond)
	reg.Status.RegisteredClusters = count
	reg.Status.ObservedGeneration = reg.Generation
	if err := r.Client.Status().Patch(ctx, reg, patch); err != nil {
		return err
	}
	r.statusWrites.Wrote(reg.UID, before, reg.ResourceVersion)
	return nil
}

func (r *Reconciler) event(reg *v1alpha1.ArgoCDClusterRegistration, eventType, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(reg, nil, eventType, reason, action, format, args...)
	}
}

// summarize lists at most five names, mapped through f when given.
func summarize(names []string, f func(string) string) string {
	const most = 5
	out := make([]string, 0, most)
	for i, n := range names {
		if i == most {
			out = append(out, fmt.Sprintf("and %d more", len(names)-most))
			break
		}
		if f != nil {
			n = f(n)
		}
		out = append(out, n)
	}
	return strings.Join(out, ", ")
}
