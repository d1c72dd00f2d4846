// Package addonobjects writes the OCM addon objects of a GitOpsCluster: its entries of the
// agent's and the Argo CD components' ClusterManagementAddOns, their AddOnTemplates (the
// clusters' own Argo CD configurations among them), the AddOnDeploymentConfig they share, and
// the components' Placement; and it probes the selected clusters for an Argo CD the addon did
// not install, clearing for the components only those they may go to.
package addonobjects

import (
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
)

// Writer writes the addon objects of GitOpsClusters.
type Writer struct {
	config.Hub
	// ComponentsAddOns caches the components addon's ManagedClusterAddOns; nil when there is
	// no such cache, and then they are not read.
	ComponentsAddOns cache.Cache
	// ProbesInFlight outlives the Writer: the reconciler keeps one for all its passes. Nil
	// holds nothing back.
	ProbesInFlight *ProbesInFlight
}
