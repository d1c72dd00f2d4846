package readiness

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/selection"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
)

// Agents counts the selected clusters whose ManagedClusterAddOn is Available and lists
// (at most ten of) the others with the reason.
func Agents(ctx context.Context, reader client.Reader, addonName string, obs *selection.Observation, status *v1alpha1.GitOpsClusterStatus, setCond func(string, bool, string, string)) error {
	if obs.Selected == nil {
		setCond(v1alpha1.ConditionAgentsAvailable, false, v1alpha1.ReasonPlacementNotFound, "the selection is unknown until the Placement exists")
		return nil
	}
	available := int32(0)
	var unavailable []v1alpha1.ClusterAgentState
	// Read-only, so the cached objects are not copied: a pass reads one per selected cluster.
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	for _, cluster := range sets.List(obs.Selected) {
		if why, bad := obs.Invalid[cluster]; bad {
			unavailable = append(unavailable, v1alpha1.ClusterAgentState{Name: cluster, Reason: "InvalidAgentName",
				Message: "cluster name is not a valid argocd-agent agent name: " + why})
			continue
		}
		err := reader.Get(ctx, types.NamespacedName{Namespace: cluster, Name: addonName}, mca, client.UnsafeDisableDeepCopy)
		if apierrors.IsNotFound(err) {
			unavailable = append(unavailable, v1alpha1.ClusterAgentState{Name: cluster, Reason: "AddOnNotInstalled",
				Message: "OCM has not created the ManagedClusterAddOn yet"})
			continue
		}
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(mca.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable)
		if c != nil && c.Status == "True" {
			available++
			continue
		}
		st := v1alpha1.ClusterAgentState{Name: cluster, Reason: "AvailabilityUnknown", Message: "the addon has not reported availability yet"}
		if c != nil {
			st.Reason, st.Message = c.Reason, c.Message
		}
		unavailable = append(unavailable, st)
	}
	status.AvailableAgents = available
	total := len(unavailable)
	if len(unavailable) > ownership.MaxListedClusters {
		unavailable = unavailable[:ownership.MaxListedClusters]
	}
	status.UnavailableClusters = unavailable
	switch {
	case obs.Selected.Len() == 0:
		setCond(v1alpha1.ConditionAgentsAvailable, true, v1alpha1.ReasonNoClusters, "the Placement selects no cluster")
	case total == 0:
		setCond(v1alpha1.ConditionAgentsAvailable, true, v1alpha1.ReasonAgentsAvailable, fmt.Sprintf("all %d agent(s) available", available))
	default:
		setCond(v1alpha1.ConditionAgentsAvailable, false, v1alpha1.ReasonAgentsUnavailable,
			fmt.Sprintf("%d of %d agent(s) available; %d not available (see status.unavailableClusters)", available, obs.Selected.Len(), total))
	}
	return nil
}
