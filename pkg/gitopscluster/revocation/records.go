package revocation

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
)

// Result is what the revocation phase tells the rest of the reconcile.
type Result struct {
	// Requeue is when pending departures are looked at again (zero: none pending).
	Requeue time.Duration
	// Paused is the message of a pass the circuit breaker holds back ("" when not paused).
	Paused string
	// Pending counts departures not acted on yet.
	Pending int
	// Revoked counts clusters of spec.revokedClusters whose agent is cut off.
	Revoked int
	// BlocklistKeys and BlocklistBytes measure the principal's blocklist (from the cache);
	// BlocklistFull is set when certificates could not be blocked for want of room.
	BlocklistKeys, BlocklistBytes int
	BlocklistFull                 bool
	// AwaitingBlock counts clusters unregistered here whose certificates are still to be
	// blocked: a ledger without a cluster secret, for a cluster this GitOpsCluster does not
	// own. A pass that does not retry their block (each departure waits its settle period
	// again) still reports a full blocklist while they wait.
	AwaitingBlock int
	// Events are what the pass did that a person must hear of (revocations, requests), for
	// the caller to emit on the GitOpsCluster.
	Events []config.Event
}

// Records are the clusters a GitOpsCluster has an agent record for on its principal.
type Records struct {
	// Secrets are its cluster secrets by cluster, each a shallow copy of the cache's object
	// (read only: its maps are the cache's), so that a revocation can let go of each one as it
	// is done with it.
	Secrets map[string]*corev1.Secret
	// Ledgers are the owners recorded on the ledgers it owns (or that no live GitOpsCluster
	// owns), by cluster. Only the owner is kept: at 10,000 clusters the ledger objects
	// themselves would stay in memory through a whole deletion.
	Ledgers map[string]ledger.Owner
	// Revoked are the clusters revoked by an AgentRevocation on any principal the manager
	// serves, or listed in the GitOpsCluster's spec.revokedClusters; Revocations are the first
	// kind only, and RevocationsHere those of the GitOpsCluster's own principal.
	Revoked, Revocations, RevocationsHere sets.Set[string]
}

func (a Records) clusters() sets.Set[string] {
	out := sets.New[string]()
	for c := range a.Secrets {
		out.Insert(c)
	}
	for c := range a.Ledgers {
		out.Insert(c)
	}
	return out
}

// forget drops clusters from the records.
func (a Records) forget(clusters []string) {
	for _, c := range clusters {
		delete(a.Secrets, c)
		delete(a.Ledgers, c)
	}
}
