package gitopscluster

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
)

// agentsOnOtherVersion counts the selected clusters whose agent runs another version than the
// principal. An agent's version is the image tag in the AddOnDeploymentConfig that OCM last
// applied on its cluster (the ManagedClusterAddOn's status.configReferences): OCM reports which
// config a cluster runs, while the agent pod itself is out of the hub's sight. The principal's
// version is its Deployment's image tag, or the GitOpsCluster's agent image tag when the
// principal does not run on this hub. A cluster that has applied no config yet runs no agent and
// is not counted. Reads are cached: the MCAs of this addon and the GitOpsCluster's configs.
func (r *Reconciler) agentsOnOtherVersion(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string, clusters []string) (int32, error) {
	want, err := r.principalImage(ctx, goc, principalNS)
	if err != nil {
		return 0, err
	}
	var adcs addonv1alpha1.AddOnDeploymentConfigList
	if err := r.Client.List(ctx, &adcs, client.InNamespace(goc.Namespace), client.MatchingLabels{
		v1alpha1.LabelOwnerNamespace: goc.Namespace, v1alpha1.LabelOwnerName: goc.Name}); err != nil {
		return 0, err
	}
	tagOf := map[string]string{}
	for _, adc := range adcs.Items {
		for _, v := range adc.Spec.CustomizedVariables {
			if v.Name == addon.VarAgentImage {
				tagOf[adc.Name] = imageTag(v.Value)
			}
		}
	}
	n := int32(0)
	// Read-only, so the cached objects are not copied: a pass reads one per selected cluster.
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	for _, cluster := range clusters {
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: cluster, Name: r.Config.AddonName}, mca, client.UnsafeDisableDeepCopy); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return 0, err
		}
		for _, ref := range mca.Status.ConfigReferences {
			if ref.Resource != addon.ResourceAddOnDeploymentConfigs || ref.LastAppliedConfig == nil || ref.LastAppliedConfig.Namespace != goc.Namespace {
				continue
			}
			if tag, known := tagOf[ref.LastAppliedConfig.Name]; known && tag != imageTag(want) {
				n++
			}
		}
	}
	return n, nil
}

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

// imageTag is the tag (or digest) of an image reference; registry and repository do not make a
// version, so a mirror of the same release compares equal.
func imageTag(image string) string {
	if _, digest, ok := strings.Cut(image, "@"); ok {
		return digest
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return "latest"
}
