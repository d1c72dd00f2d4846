// Package clustersecrets keeps the Argo CD cluster secrets that register a GitOpsCluster's agents
// with the principal: one per owned cluster, its resource-proxy client certificate issued by the
// principal's CA and recorded in the cluster's ledger before the secret is written, renewed
// before expiry or after a CA change, and labelled like its ManagedCluster.
package clustersecrets

import (
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
)

// Writer writes the agents' cluster secrets.
type Writer struct {
	config.Hub
}
