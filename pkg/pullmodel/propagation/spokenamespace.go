package propagation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

// LabelSpokeNamespace on a ManagedCluster is the Argo CD namespace of that cluster
// (openshift-gitops on OpenShift GitOps, argocd on a plain install): delivered Applications
// land there instead of in the manager's --pull-model-spoke-namespace. A hub admin sets it; the
// chart's admission policy keeps the cluster's own agents (which may update their
// ManagedCluster) from setting, changing or removing it. The project's prefix also keeps it out
// of the labels copied onto cluster secrets.
const LabelSpokeNamespace = "argocd-agent-addon.open-cluster-management.io/pull-model-namespace"

// ReasonBadSpokeNamespace is the refusal of a cluster whose LabelSpokeNamespace is not a
// namespace name.
const ReasonBadSpokeNamespace = "BadSpokeNamespace"

// ForCluster is the policy for deliveries to cluster: the spoke namespace is the cluster's
// LabelSpokeNamespace when it has one, else the operator's default. A label that is not a
// namespace name refuses delivery: guessing would put Applications where no Argo CD reads them.
func (p Policy) ForCluster(cluster *clusterv1.ManagedCluster) (Policy, *Refusal) {
	if cluster == nil {
		return p, nil
	}
	ns, ok := cluster.Labels[LabelSpokeNamespace]
	if !ok {
		return p, nil
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return p, &Refusal{ReasonBadSpokeNamespace, fmt.Sprintf("managed cluster %q has label %s=%q, which is not a namespace name (%s); a hub admin sets it to the cluster's Argo CD namespace, or removes it for the default %q",
			cluster.Name, LabelSpokeNamespace, ns, strings.Join(errs, "; "), p.SpokeNamespace)}
	}
	p.SpokeNamespace = ns
	return p, nil
}
