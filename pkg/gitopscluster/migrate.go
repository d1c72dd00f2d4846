package gitopscluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// legacyMigration moves, once per start of the leader, the records of the earlier layout into
// the principal namespaces: each cluster's ledger from its own hub namespace, and the expiry
// record off each blocklist. No entry is lost: a ledger is merged before it is deleted, and
// deleted only if unchanged since it was read.
type legacyMigration struct{ r *Reconciler }

// NeedLeaderElection: only the leader writes.
func (m *legacyMigration) NeedLeaderElection() bool { return true }

func (m *legacyMigration) Start(ctx context.Context) error {
	if err := m.r.migrateLegacy(ctx); err != nil {
		// A later start tries again; meanwhile the old ledgers keep their entries.
		log.FromContext(ctx).Error(err, "moving certificate records of the earlier layout")
	}
	return nil
}

func (r *Reconciler) migrateLegacy(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("migration")
	var gocs v1alpha1.GitOpsClusterList
	if err := r.Client.List(ctx, &gocs); err != nil {
		return err
	}
	principals := sets.New[string]()
	for i := range gocs.Items {
		if p := names.PrincipalNamespace(&gocs.Items[i]); r.namespaceManaged(p) {
			principals.Insert(p)
		}
	}
	now := r.Config.Now()
	for _, p := range sets.List(principals) {
		n, err := r.ledgerStore(p).MigrateLegacyBlocklist(ctx, now)
		if err != nil {
			return err
		}
		if n > 0 {
			logger.Info("moved the blocklist's expiry record into the revocation record", "namespace", p, "entries", n)
		}
	}
	// One list, filtered by the API server, finds every earlier ledger: a fleet that has none
	// left costs one call per leader start, not one read per ManagedCluster.
	var legacy corev1.ConfigMapList
	if err := r.apiReader().List(ctx, &legacy, client.MatchingFields{"metadata.name": ledger.LegacyLedgerName}); err != nil {
		return fmt.Errorf("listing the ledgers of the earlier layout: %w", err)
	}
	for i := range legacy.Items {
		old := &legacy.Items[i]
		c := old.Namespace
		entries := ledger.ParseEntries(old.Data, now)
		// The owner's principal issued them. A cluster nobody owns has left: its certificates
		// go to every principal, where the next pass revokes them.
		targets := principals
		owner := ledger.Owner{}
		selectors, err := fleet.SelectorsOf(ctx, r.Client, c)
		if err != nil {
			return err
		}
		if len(selectors) > 0 {
			targets = sets.New(names.PrincipalNamespace(selectors[0]))
			owner = ledger.Owner{Namespace: selectors[0].Namespace, Name: selectors[0].Name}
		}
		for _, p := range sets.List(targets) {
			if err := r.ledgerStore(p).Merge(ctx, c, owner, entries, now); err != nil {
				return fmt.Errorf("moving the ledger of cluster %s to %s: %w", c, p, err)
			}
		}
		if err := ledger.DeleteLegacyLedger(ctx, r.Client, old); err != nil {
			return err
		}
		logger.Info("moved a certificate ledger to the principal namespace", "cluster", c, "entries", len(entries), "principals", sets.List(targets))
	}
	return nil
}
