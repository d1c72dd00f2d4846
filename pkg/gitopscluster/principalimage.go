package gitopscluster

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// principalImage is the principal Deployment's image, else the agent image the GitOpsCluster
// configures (its own, or the manager's default).
func (r *Reconciler) principalImage(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string) (string, error) {
	dep := &appsv1.Deployment{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: principalNS, Name: r.Config.PrincipalDeploymentName}, dep)
	if apierrors.IsNotFound(err) || (err == nil && len(dep.Spec.Template.Spec.Containers) == 0) {
		return r.addOns().AgentImage(ctx, goc, principalNS)
	}
	if err != nil {
		return "", err
	}
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == "principal" || c.Name == "argocd-agent-principal" {
			return c.Image, nil
		}
	}
	return dep.Spec.Template.Spec.Containers[0].Image, nil
}
