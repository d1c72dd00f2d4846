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

// Writer writes the addon objects of GitOpsClusters: the ClusterManagementAddOns' entries,
// the AddOnTemplates, the AddOnDeploymentConfigs and the components' Placement.
type Writer struct {
	config.Hub
	// ComponentsAddOns caches the components addon's ManagedClusterAddOns; nil when there is
	// no such cache, and then they are not read.
	ComponentsAddOns cache.Cache
}

// Components writes what the components addon needs for a GitOpsCluster: its
// ClusterManagementAddOn entry and AddOnTemplate, the per-cluster configs (mirrors, a cluster's
// own Argo CD configuration), the OpenShift and opt-out Placements, and what it reports of them.
// It shares the Writer's clients and its writes of entries and templates.
type Components struct {
	*Writer
}

// Components is the Writer's part for the components addon.
func (w *Writer) Components() Components { return Components{w} }

// Prober probes the clusters GitOpsClusters select for an Argo CD the addon did not install,
// keeps the clearance labels that let the components go only where they may, and reports
// what the probes found.
type Prober struct {
	config.Hub
	// ComponentsAddOns is the Writer's: a cluster whose components addon is installed keeps
	// its clearance.
	ComponentsAddOns cache.Cache
	// ProbesInFlight outlives the Prober: the reconciler keeps one for all its passes. Nil
	// holds nothing back.
	ProbesInFlight *ProbesInFlight
}
