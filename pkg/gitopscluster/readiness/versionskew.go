package readiness

import (
	"context"
	"strings"

	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AgentsOnOtherVersion counts the clusters whose agent runs another version than the
// principal, whose image is want. An agent's version is the image tag in the AddOnDeploymentConfig that OCM last
// applied on its cluster (the ManagedClusterAddOn's status.configReferences): OCM reports which
// config a cluster runs, while the agent pod itself is out of the hub's sight. A cluster that has applied no config yet runs no agent and
// is not counted. Reads are cached: the MCAs of this addon and the GitOpsCluster's configs.
func AgentsOnOtherVersion(ctx context.Context, reader client.Reader, addonName string, goc *v1alpha1.GitOpsCluster, clusters []string, want string) (int32, error) {
	var adcs addonv1alpha1.AddOnDeploymentConfigList
	if err := reader.List(ctx, &adcs, client.InNamespace(goc.Namespace), client.MatchingLabels{
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
		if err := reader.Get(ctx, types.NamespacedName{Namespace: cluster, Name: addonName}, mca, client.UnsafeDisableDeepCopy); err != nil {
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
