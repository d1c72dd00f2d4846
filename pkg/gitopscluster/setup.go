package gitopscluster

import (
	"context"
	"reflect"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
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
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/principal"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/recorder"
)

// SetupWithManager registers the reconciler and the watches that map every input of a
// reconcile back to the GitOpsClusters it affects, and only those.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	wk := r.wakes()
	if r.Recorder == nil {
		r.Recorder = recorder.For(mgr, names.EventReporter)
	}
	// Made while the caches fill, by every replica, so a standby that takes over has it too;
	// where every principal already has its key, that is tenths of a second of one core spent
	// at each start for nothing.
	r.jwtKeys.New = r.Config.NewJWTKey
	r.jwtKeys.Prepare()
	b, err := r.watchComponents(mgr, ctrl.NewControllerManagedBy(mgr))
	if err != nil {
		return err
	}
	return r.watchProbes(b).
		Named("gitopscluster").
		For(&v1alpha1.GitOpsCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&clusterv1beta1.Placement{}, handler.EnqueueRequestsFromMapFunc(wk.selectorsOfPlacement)).
		Watches(&clusterv1beta1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(wk.selectorsOfDecision),
			builder.WithPredicates(ownership.DecisionsChanged())).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(wk.membersOfObjectNamespace), builder.WithPredicates(wk.principalServices())).
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(wk.membersOfObjectNamespace),
			builder.WithPredicates(named(r.Config.PrincipalDeploymentName), podTemplateChanged())).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(wk.all), builder.WithPredicates(nodeAddressOrReadinessChanged())).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(wk.ownerOrMembers), builder.WithPredicates(wk.pkiOrOwnedSecrets(), clusterlabels.IgnoreCopyOnlyUpdates())).
		// Ledgers and the revocation record: a certificate recorded for a cluster that is not
		// (or no longer) owned on its principal is revoked on the next pass.
		Watches(&corev1.ConfigMap{}, recordsChanged(wk.ownerOrMembers, wk.ledgerChangeMayRevoke), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[ledger.LabelRecord] != ""
		}))).
		Watches(&addonv1alpha1.ClusterManagementAddOn{}, handler.EnqueueRequestsFromMapFunc(wk.all),
			builder.WithPredicates(predicate.Or(named(r.Config.AddonName), named(config.ComponentsAddonName(r.Config.AddonName))))).
		Watches(&addonv1alpha1.ManagedClusterAddOn{}, settled(wk.selectorsOfClusterNamespace, ocmStatusSettle),
			builder.WithPredicates(named(r.Config.AddonName), predicate.Or(availabilityChanged(), configReferencesChanged()))).
		// A GitOpsCluster going away may hand its clusters to a younger one.
		Watches(&v1alpha1.GitOpsCluster{}, handler.EnqueueRequestsFromMapFunc(wk.all), builder.WithPredicates(goingAway())).
		// The oldest GitOpsCluster of a principal decides what its others must agree with
		// (PKI, applicationMapping), and writes the PKI with every member's address: a spec
		// change of one, or a new principal address in its status, wakes the others.
		Watches(&v1alpha1.GitOpsCluster{}, handler.EnqueueRequestsFromMapFunc(wk.otherMembers),
			builder.WithPredicates(samePrincipalWakes())).
		// A revocation made or lifted changes which clusters the GitOpsClusters of every
		// principal register.
		Watches(&v1alpha1.AgentRevocation{}, handler.EnqueueRequestsFromMapFunc(wk.reachOfRevocation), builder.WithPredicates(madeOrLifted())).
		Watches(&addonv1alpha1.AddOnTemplate{}, handler.EnqueueRequestsFromMapFunc(forOwnerLabels)).
		Watches(&addonv1alpha1.AddOnDeploymentConfig{}, handler.EnqueueRequestsFromMapFunc(forOwnerLabels)).
		Complete(r)
}

// ledgerSettle is how long ledger changes gather before they wake the GitOpsCluster. The signer
// writes a ledger for every certificate it issues, so in a renewal wave of thousands every
// ledger waking a pass over the whole fleet kept one reconcile running for the whole wave,
// taking the CPU the signer and the API server need. What a ledger change asks of the pass
// (revoking a certificate recorded for a cluster that lost its right, which the signer never
// publishes) can wait that long.
const ledgerSettle = 5 * time.Second

// ocmStatusSettle is how long what OCM writes of each cluster's addons and probe gathers before
// it wakes the cluster's GitOpsClusters. OCM writes a ManagedClusterAddOn several times as it
// installs an addon (created, its configs referenced, available), and a work agent a probe's
// status once: in a rollout over thousands of clusters each of those woke a pass over the whole
// fleet, and passes ran back to back for all of it (at 1,000 clusters up to half a core of the
// manager). What they ask of a pass (the agents' availability, pointing a cluster's components
// at its own config, pruning configs no longer in use, installing where a probe found no Argo
// CD) can wait that long.
const ocmStatusSettle = 2 * time.Second

// settled enqueues the requests an event maps to after settle. A request already waiting keeps
// its earlier time: the first event of a stream fixes when the pass runs and later ones join
// it, so that a stream costs one pass per settle, not one per event.
func settled(toRequests handler.MapFunc, settle time.Duration) handler.EventHandler {
	return eachEvent(func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], _ bool) {
		for _, req := range toRequests(ctx, o) {
			q.AddAfter(req, settle)
		}
	})
}

// eachEvent hands every event's object to add; written is true for a creation or an update.
func eachEvent(add func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], written bool)) handler.Funcs {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q, true)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.ObjectNew, q, true)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q, false)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q, false)
		},
	}
}

// recordsChanged enqueues the GitOpsClusters of a changed ledger after ledgerSettle, so that a
// wave of ledger writes costs one pass per ledgerSettle, and those of a changed revocation
// record at once. A ledger created or updated wakes no pass when mayRevoke says the pass has
// nothing to revoke for it.
func recordsChanged(toRequests handler.MapFunc, mayRevoke func(context.Context, client.Object) bool) handler.EventHandler {
	return eachEvent(func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], written bool) {
		isLedger := o.GetLabels()[ledger.LabelRecord] == ledger.RecordLedger
		if isLedger && written && !mayRevoke(ctx, o) {
			return
		}
		for _, req := range toRequests(ctx, o) {
			if isLedger {
				q.AddAfter(req, ledgerSettle)
			} else {
				q.Add(req)
			}
		}
	})
}

func forOwnerLabels(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	ns, name := l[v1alpha1.LabelOwnerNamespace], l[v1alpha1.LabelOwnerName]
	if ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// nodeAddressOrReadinessChanged ignores node heartbeats, which update every node every few
// seconds and would otherwise wake every GitOpsCluster.
func nodeAddressOrReadinessChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Node)
		n, ok2 := e.ObjectNew.(*corev1.Node)
		if !ok1 || !ok2 {
			return true
		}
		return principal.NodeReady(o) != principal.NodeReady(n) || !reflect.DeepEqual(o.Status.Addresses, n.Status.Addresses)
	}}
}

// availabilityChanged passes ManagedClusterAddOn updates that change the Available condition.
func availabilityChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*addonv1alpha1.ManagedClusterAddOn)
		n, ok2 := e.ObjectNew.(*addonv1alpha1.ManagedClusterAddOn)
		if !ok1 || !ok2 {
			return true
		}
		a := meta.FindStatusCondition(o.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable)
		b := meta.FindStatusCondition(n.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable)
		if a == nil || b == nil {
			return a != b
		}
		return a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message
	}}
}

// configReferencesChanged passes ManagedClusterAddOn updates that change which configs the
// cluster uses, so old AddOnDeploymentConfigs are pruned as soon as a rollout moves on.
func configReferencesChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*addonv1alpha1.ManagedClusterAddOn)
		n, ok2 := e.ObjectNew.(*addonv1alpha1.ManagedClusterAddOn)
		return !ok1 || !ok2 || !reflect.DeepEqual(o.Status.ConfigReferences, n.Status.ConfigReferences)
	}}
}

// samePrincipalWakes passes the changes of a GitOpsCluster that its principal's other members
// must see: its spec (generation), or another principal address in its status (the
// principal's serving certificate, which its elder writes, must name it). Its other status
// writes pass nothing, so members never wake each other in a loop.
func samePrincipalWakes() predicate.Predicate {
	return predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, principalAddressChanged())
}

func principalAddressChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*v1alpha1.GitOpsCluster), e.ObjectNew.(*v1alpha1.GitOpsCluster)
			return !equality.Semantic.DeepEqual(o.Status.Principal, n.Status.Principal)
		},
	}
}

// goingAway passes a GitOpsCluster's deletion, and the update that marks it for deletion.
func goingAway() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
	}
}

// madeOrLifted passes a revocation's creation, its deletion and the start of its lift, not the
// status writes that report its enforcement: each would wake every GitOpsCluster of the cluster.
func madeOrLifted() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
	}
}

// podTemplateChanged ignores the principal Deployment's status churn (replica counts, rollout
// conditions): only its pod template (image, the restart stamp) matters here.
func podTemplateChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*appsv1.Deployment)
		n, ok2 := e.ObjectNew.(*appsv1.Deployment)
		return !ok1 || !ok2 || !equality.Semantic.DeepEqual(o.Spec.Template, n.Spec.Template)
	}}
}
