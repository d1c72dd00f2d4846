package gitopscluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/addonobjects"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
)

// wakes maps the objects a pass reads to the GitOpsClusters they concern; each function says
// what an object's change wakes.
type wakes struct {
	client         client.Client
	config         config.Config
	probesInFlight *addonobjects.ProbesInFlight
}

// wakes is this reconciler's mapping of changes to GitOpsClusters.
func (r *Reconciler) wakes() wakes {
	return wakes{client: r.Client, config: r.Config, probesInFlight: &r.probesInFlight}
}

func (w wakes) selectorsOfPlacement(ctx context.Context, o client.Object) []reconcile.Request {
	return w.placementThenAll(ctx, o.GetNamespace(), o.GetName())
}

func (w wakes) selectorsOfDecision(ctx context.Context, o client.Object) []reconcile.Request {
	p := o.GetLabels()[ownership.PlacementLabel]
	if p == "" {
		return nil
	}
	return w.placementThenAll(ctx, o.GetNamespace(), p)
}

func (w wakes) placementThenAll(ctx context.Context, ns, name string) []reconcile.Request {
	keys, err := ownership.GitOpsClustersForPlacement(ctx, w.client, ns, name)
	if err != nil {
		return nil
	}
	// Other GitOpsClusters may select the same clusters; conflicts are reported on both, so
	// every GitOpsCluster is told when any selection changes. Their number is small.
	return w.withAll(ctx, keys)
}

func (w wakes) withAll(ctx context.Context, first []types.NamespacedName) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(first))
	seen := map[types.NamespacedName]bool{}
	for _, k := range first {
		seen[k] = true
		out = append(out, reconcile.Request{NamespacedName: k})
	}
	for _, req := range w.all(ctx, nil) {
		if !seen[req.NamespacedName] {
			out = append(out, req)
		}
	}
	return out
}

func (w wakes) all(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.GitOpsClusterList
	if err := w.client.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
	}
	return out
}

func (w wakes) membersOfObjectNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return w.membersOf(ctx, o.GetNamespace())
}

// membersOf lists the GitOpsClusters whose principal lives in namespace ns.
func (w wakes) membersOf(ctx context.Context, ns string) []reconcile.Request {
	var list v1alpha1.GitOpsClusterList
	if err := w.client.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if names.PrincipalNamespace(&list.Items[i]) == ns {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
		}
	}
	return out
}

// otherMembers maps a GitOpsCluster to the others of its principal namespace.
func (w wakes) otherMembers(ctx context.Context, o client.Object) []reconcile.Request {
	goc, ok := o.(*v1alpha1.GitOpsCluster)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, req := range w.membersOf(ctx, names.PrincipalNamespace(goc)) {
		if req.Namespace != goc.Namespace || req.Name != goc.Name {
			out = append(out, req)
		}
	}
	return out
}

func (w wakes) ownerOrMembers(ctx context.Context, o client.Object) []reconcile.Request {
	if reqs := forOwnerLabels(ctx, o); len(reqs) > 0 {
		return reqs
	}
	return w.membersOfObjectNamespace(ctx, o)
}

func (w wakes) selectorsOfClusterNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	gocs, err := ownership.SelectorsOf(ctx, w.client, o.GetNamespace())
	if err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(gocs))
	for _, g := range gocs {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name}})
	}
	return out
}

// ledgerChangeMayRevoke reports whether a ledger just created or updated can give its owner's
// pass anything to revoke. The signer records every certificate it issues, so in a renewal
// wave nearly every ledger write is of a cluster that keeps its agent, and each woke a pass
// over the whole fleet.
//
// While the cache holds the cluster's secret from the ledger's owner, not being deleted, the
// write changes nothing the pass decides: the cluster is in the pass's records through its
// secret anyway, and the certificates a ledger lists are read live when the cluster is
// revoked. Every revocation of the cluster deletes that secret: seen live here, its deletion
// reaches the cache after this write did, and wakes the same owner (pkiOrOwnedSecrets).
func (w wakes) ledgerChangeMayRevoke(ctx context.Context, o client.Object) bool {
	cm, ok := o.(*corev1.ConfigMap)
	if !ok {
		return true
	}
	cluster, owner := ledger.ClusterOf(cm), ledger.OwnerOf(cm)
	if cluster == "" || owner.Name == "" {
		return true
	}
	s := &corev1.Secret{}
	if err := w.client.Get(ctx, types.NamespacedName{Namespace: cm.Namespace, Name: agentsecret.Name(cluster)}, s, client.UnsafeDisableDeepCopy); err != nil {
		return true
	}
	kept := s.DeletionTimestamp.IsZero() && s.Labels[v1alpha1.LabelAgentName] == cluster &&
		s.Labels[v1alpha1.LabelOwnerNamespace] == owner.Namespace && s.Labels[v1alpha1.LabelOwnerName] == owner.Name
	return !kept
}

func named(name string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == name })
}

func (w wakes) principalServices() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetName() == w.config.PrincipalServiceName || o.GetName() == w.config.ResourceProxyServiceName
	})
}

func (w wakes) pkiOrOwnedSecrets() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		switch o.GetName() {
		case names.CASecretName, names.PrincipalTLSSecretName, names.ResourceProxySecretName, names.JWTSecretName, certmanager.CAIssuedSecretName, certmanager.PrincipalIssuedSecretName:
			return true
		}
		return o.GetLabels()[v1alpha1.LabelOwnerName] != ""
	})
}

// selectorsOfCluster wakes the GitOpsClusters selecting the cluster, as selectorsOfClusterNamespace
// does for the cluster a ManagedClusterAddOn lives in.
func (w wakes) selectorsOfCluster(ctx context.Context, o client.Object) []reconcile.Request {
	return w.selectorsOfClusterNamespace(ctx, &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetName()}})
}

func (w wakes) selectorsOfProbedCluster(ctx context.Context, o client.Object) []ctrl.Request {
	w.probesInFlight.Seen(o.GetName(), o.GetNamespace())
	return w.selectorsOfCluster(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: o.GetNamespace()}})
}

// reachOfRevocation maps an AgentRevocation to the GitOpsClusters it changes: those of its
// principal namespace, and, since a revocation holds on every principal, those that select
// its cluster wherever their principal is (a lift must let them register it again).
func (w wakes) reachOfRevocation(ctx context.Context, o client.Object) []reconcile.Request {
	out := w.membersOf(ctx, o.GetNamespace())
	selectors, err := ownership.SelectorsOf(ctx, w.client, o.GetName())
	if err != nil {
		return out
	}
	seen := map[types.NamespacedName]bool{}
	for _, req := range out {
		seen[req.NamespacedName] = true
	}
	for _, g := range selectors {
		if k := (types.NamespacedName{Namespace: g.Namespace, Name: g.Name}); !seen[k] {
			seen[k] = true
			out = append(out, reconcile.Request{NamespacedName: k})
		}
	}
	return out
}
