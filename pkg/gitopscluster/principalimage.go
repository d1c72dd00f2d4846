package gitopscluster

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/addonobjects"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/principal"
)

// principalImage is the principal Deployment's image, else the agent image the GitOpsCluster
// configures (its own, or the manager's default).
func (r *Reconciler) principalImage(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string) (string, error) {
	if image, found, err := principal.Image(ctx, r.Client, types.NamespacedName{Namespace: principalNS, Name: r.Config.PrincipalDeploymentName}); err != nil || found {
		return image, err
	}
	return addonobjects.AgentImage(ctx, r.hub(), goc, principalNS)
}
