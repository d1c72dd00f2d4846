// Package revocation cuts agents off their principal: the clusters a person revokes
// (spec.revokedClusters and AgentRevocations, enforced per principal), the clusters that leave a
// GitOpsCluster's selection (once the departure is confirmed, within a circuit breaker), the
// ledger of every certificate an agent was given, and the principal's blocklist.
package revocation

import (
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
)

// Revoker revokes agents and keeps their records on the principal.
type Revoker struct {
	config.Hub
	// Departures is the memory of departures, kept across passes.
	Departures *Departures
}

// LedgerStore is the store of the agents' certificate ledgers and blocklist in principalNS.
func LedgerStore(h config.Hub, principalNS string) ledger.Store {
	return ledger.Store{Client: h.Client, Reader: h.Reader, Cache: h.Client, Namespace: principalNS}
}
