package gitopscluster

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
)

// forRevocation maps an AgentRevocation to the GitOpsClusters it changes: those of its
// principal namespace, and, since a revocation holds on every principal, those that select
// its cluster wherever their principal is (a lift must let them register it again).
func (r *Reconciler) forRevocation(ctx context.Context, o client.Object) []reconcile.Request {
	out := r.ofPrincipal(ctx, o.GetNamespace())
	selectors, err := ownership.SelectorsOf(ctx, r.Client, o.GetName())
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
