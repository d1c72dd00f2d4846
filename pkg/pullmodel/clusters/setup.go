package clusters

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/clusterlabels"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/recorder"
)

// Field indexes this package registers on the manager's cache.
const (
	// IndexPlacement indexes ArgoCDClusterRegistrations by "<namespace>/<placement name>".
	IndexPlacement = "argocd-agent-addon.registration.placement"
	// IndexCluster indexes registration-owned Secrets by the cluster they register.
	IndexCluster = "argocd-agent-addon.registration.cluster"
)

// Setup registers the indexes, the registration controller and the label controller; grace is
// how long a cluster that left during an outage stays registered. Without the
// ArgoCDClusterRegistration CRD (Helm does not add CRDs on upgrade) it logs so and registers
// nothing, instead of failing the whole manager.
func Setup(ctx context.Context, mgr ctrl.Manager, managedNamespaces []string, grace time.Duration) error {
	gvk := v1alpha1.GroupVersion.WithKind("ArgoCDClusterRegistration")
	if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		if meta.IsNoMatchError(err) {
			ctrl.Log.WithName("clusters").Info("the ArgoCDClusterRegistration CRD is not installed; cluster registration for ApplicationSets is off (apply the chart's crds/ to turn it on, then restart)")
			return nil
		}
		return fmt.Errorf("looking up the ArgoCDClusterRegistration API: %w", err)
	}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.ArgoCDClusterRegistration{}, IndexPlacement, func(o client.Object) []string {
		reg := o.(*v1alpha1.ArgoCDClusterRegistration)
		return []string{ownership.PlacementKey(reg.Namespace, reg.Spec.PlacementRef.Name)}
	}); err != nil {
		return fmt.Errorf("indexing ArgoCDClusterRegistrations: %w", err)
	}
	rec := recorder.For(mgr, names.EventReporter)
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, ManagedNamespaces: managedNamespaces, Grace: grace}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("argocdclusterregistration").
		For(&v1alpha1.ArgoCDClusterRegistration{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&clusterv1beta1.Placement{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.forPlacement(ctx, o.GetNamespace(), o.GetName())
		})).
		Watches(&clusterv1beta1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			if p := o.GetLabels()[ownership.PlacementLabel]; p != "" {
				return r.forPlacement(ctx, o.GetNamespace(), p)
			}
			return nil
		}), builder.WithPredicates(ownership.DecisionsChanged())).
		// A selected cluster registered on the hub after the Placement chose it.
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.forCluster), builder.WithPredicates(createOrDelete())).
		// An outage beginning or ending on a cluster that has secrets: one kept through it may
		// go, or must be recorded before the Placement's decision arrives.
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.forClusterSecrets), builder.WithPredicates(outageChanged())).
		// A registration's own secret changed or deleted by someone else is put back; a foreign
		// cluster secret that blocked a registration going away frees its name.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.forSecret), builder.WithPredicates(ownedOrForeignClusterSecretDeleted(), clusterlabels.IgnoreCopyOnlyUpdates())).
		Complete(r); err != nil {
		return err
	}
	return clusterlabels.SetupSync(ctx, mgr, "argocdclusterregistration-labels", clusterlabels.Lookup{Index: IndexCluster}, registeredCluster)
}

// registeredCluster is the cluster a registration's Secret registers, "" for other Secrets.
func registeredCluster(o client.Object) string {
	s, ok := o.(*corev1.Secret)
	if !ok || s.Labels[LabelRegistration] == "" {
		return ""
	}
	return string(s.Data["name"])
}

func (r *Reconciler) forPlacement(ctx context.Context, ns, placement string) []reconcile.Request {
	var list v1alpha1.ArgoCDClusterRegistrationList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexPlacement: ownership.PlacementKey(ns, placement)}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// forCluster maps a ManagedCluster to the registrations whose Placement selects it, through the
// decision index: the cost is the number of Placements naming it, not the fleet size.
func (r *Reconciler) forCluster(ctx context.Context, o client.Object) []reconcile.Request {
	// Only the namespace and labels are read: the cache's own objects, not copies of every
	// decision page naming the cluster (this runs for every ManagedCluster event of a fleet).
	var pds clusterv1beta1.PlacementDecisionList
	if err := r.Client.List(ctx, &pds, client.MatchingFields{ownership.IndexDecisionClusters: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	seen := sets.New[types.NamespacedName]()
	var out []reconcile.Request
	for i := range pds.Items {
		p := pds.Items[i].Labels[ownership.PlacementLabel]
		if p == "" {
			continue
		}
		for _, req := range r.forPlacement(ctx, pds.Items[i].Namespace, p) {
			if !seen.Has(req.NamespacedName) {
				seen.Insert(req.NamespacedName)
				out = append(out, req)
			}
		}
	}
	return out
}

// forClusterSecrets maps a ManagedCluster to the registrations that hold a secret for it,
// through the secrets' cluster index.
func (r *Reconciler) forClusterSecrets(ctx context.Context, o client.Object) []reconcile.Request {
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexCluster: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	seen := sets.New[types.NamespacedName]()
	var out []reconcile.Request
	for i := range list.Items {
		key := types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Labels[LabelRegistration]}
		if key.Name != "" && !seen.Has(key) {
			seen.Insert(key)
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

func (r *Reconciler) forSecret(ctx context.Context, o client.Object) []reconcile.Request {
	if owner := o.GetLabels()[LabelRegistration]; owner != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: owner}}}
	}
	var list v1alpha1.ArgoCDClusterRegistrationList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// ownedOrForeignClusterSecretDeleted passes every event of a registration's secrets and the
// deletion of other Argo CD cluster secrets.
func ownedOrForeignClusterSecretDeleted() predicate.Predicate {
	owned := func(o client.Object) bool { return o.GetLabels()[LabelRegistration] != "" }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return owned(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return owned(e.ObjectNew) || owned(e.ObjectOld) },
		GenericFunc: func(e event.GenericEvent) bool { return owned(e.Object) },
		DeleteFunc: func(e event.DeleteEvent) bool {
			return owned(e.Object) || e.Object.GetLabels()[v1alpha1.LabelSecretType] == "cluster"
		},
	}
}

// outageChanged passes ManagedCluster updates that add or remove an outage taint, or change
// whether it is Available: rare, unlike its other status updates.
func outageChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*clusterv1.ManagedCluster)
			n, ok2 := e.ObjectNew.(*clusterv1.ManagedCluster)
			if !ok1 || !ok2 {
				return false
			}
			return outageKeys(o) != outageKeys(n) ||
				meta.IsStatusConditionTrue(o.Status.Conditions, clusterv1.ManagedClusterConditionAvailable) != meta.IsStatusConditionTrue(n.Status.Conditions, clusterv1.ManagedClusterConditionAvailable)
		},
	}
}

// outageKeys lists the outage taints of mc, in the order they appear.
func outageKeys(mc *clusterv1.ManagedCluster) string {
	var out []string
	for _, t := range mc.Spec.Taints {
		if isOutageKey(t.Key) {
			out = append(out, t.Key+"="+string(t.Effect))
		}
	}
	return strings.Join(out, ",")
}

// createOrDelete ignores ManagedCluster updates: their status and leases change all the time.
func createOrDelete() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
