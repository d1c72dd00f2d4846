package principal

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Image returns the image of the principal's Deployment: its container named "principal" or
// "argocd-agent-principal", else its first. found is false when there is no such Deployment
// on this hub (or it has no container).
func Image(ctx context.Context, r client.Reader, deployment types.NamespacedName) (image string, found bool, err error) {
	dep := &appsv1.Deployment{}
	if err := r.Get(ctx, deployment, dep); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, err
	}
	containers := dep.Spec.Template.Spec.Containers
	for _, c := range containers {
		if c.Name == "principal" || c.Name == "argocd-agent-principal" {
			return c.Image, true, nil
		}
	}
	if len(containers) == 0 {
		return "", false, nil
	}
	return containers[0].Image, true, nil
}
