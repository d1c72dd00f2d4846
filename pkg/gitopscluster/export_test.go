package gitopscluster

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/finalizers"
)

// AddFinalizer and RemoveFinalizer are the reconciler's finalizer patches.
func AddFinalizer(ctx context.Context, c client.Client, goc *v1alpha1.GitOpsCluster) error {
	return finalizers.Add(ctx, c, goc, v1alpha1.Finalizer)
}

func RemoveFinalizer(ctx context.Context, c client.Client, goc *v1alpha1.GitOpsCluster) error {
	return finalizers.Remove(ctx, c, goc, v1alpha1.Finalizer)
}

// WriteStatus is the reconciler's status write.
func WriteStatus(ctx context.Context, c client.Client, goc *v1alpha1.GitOpsCluster, status *v1alpha1.GitOpsClusterStatus) error {
	return (&Reconciler{Client: c}).writeStatus(ctx, goc, status)
}

// LedgerSettle is how long ledger writes gather before they wake a pass.
const LedgerSettle = ledgerSettle

// OCMStatusSettle is how long OCM's writes of addons and probes gather before they wake a pass.
const OCMStatusSettle = ocmStatusSettle

// PassesShareProbesInFlight reports whether two passes of one reconciler write probes with the
// same record of those in flight.
func PassesShareProbesInFlight() bool {
	r := &Reconciler{}
	first, second := r.probes(), r.probes()
	return first.ProbesInFlight != nil && first.ProbesInFlight == second.ProbesInFlight
}
