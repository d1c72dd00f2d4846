package addon

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

// Config resources the CMA supports. Listing addontemplates is what makes OCM
// treat the addon as template-based.
const (
	ResourceAddOnTemplates          = "addontemplates"
	ResourceAddOnDeploymentConfigs  = "addondeploymentconfigs"
	clusterManagementAddOnKind      = "ClusterManagementAddOn"
	clusterManagementAddOnDescribed = "Installs the argocd-agent agent on the clusters selected by a GitOpsCluster's Placement."
)

// BuildClusterManagementAddOn returns the CMA for a template-based addon
// installed by OCM's addon-manager through placements. Placements start
// empty: the caller fills them with BuildPlacementStrategy entries.
func BuildClusterManagementAddOn(addonName, displayName string) *addonv1alpha1.ClusterManagementAddOn {
	supported := []addonv1alpha1.ConfigMeta{
		{ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: ResourceAddOnTemplates}},
		{ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: ResourceAddOnDeploymentConfigs}},
	}
	sort.Slice(supported, func(i, j int) bool {
		if supported[i].Group != supported[j].Group {
			return supported[i].Group < supported[j].Group
		}
		return supported[i].Resource < supported[j].Resource
	})
	return &addonv1alpha1.ClusterManagementAddOn{
		TypeMeta: metav1.TypeMeta{
			APIVersion: addonv1alpha1.GroupVersion.String(),
			Kind:       clusterManagementAddOnKind,
		},
		ObjectMeta: metav1.ObjectMeta{
			Name:   addonName,
			Labels: hubLabels(),
			Annotations: map[string]string{
				// OCM's addon-manager must drive install and rollout.
				addonv1alpha1.AddonLifecycleAnnotationKey: addonv1alpha1.AddonLifecycleAddonManagerAnnotationValue,
			},
		},
		Spec: addonv1alpha1.ClusterManagementAddOnSpec{
			AddOnMeta: addonv1alpha1.AddOnMeta{
				DisplayName: displayName,
				Description: clusterManagementAddOnDescribed,
			},
			//lint:ignore SA1019 supportedConfigs is how OCM v1alpha1 marks a template-based addon.
			SupportedConfigs: supported,
			InstallStrategy: addonv1alpha1.InstallStrategy{
				Type: addonv1alpha1.AddonInstallStrategyPlacements,
			},
		},
	}
}

// BuildPlacementStrategy returns the CMA install-strategy entry that installs
// the addon on every cluster the Placement selects, with the given template
// (cluster-scoped) and ADC, and rolls config changes out with the given
// strategy. Configs are sorted by resource for stable output.
func BuildPlacementStrategy(placement types.NamespacedName, templateName string, adc types.NamespacedName,
	rollout clusterv1alpha1.RolloutStrategy) addonv1alpha1.PlacementStrategy {
	configs := []addonv1alpha1.AddOnConfig{
		{
			ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: ResourceAddOnTemplates},
			ConfigReferent:      addonv1alpha1.ConfigReferent{Name: templateName},
		},
		{
			ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: ResourceAddOnDeploymentConfigs},
			ConfigReferent:      addonv1alpha1.ConfigReferent{Namespace: adc.Namespace, Name: adc.Name},
		},
	}
	sort.Slice(configs, func(i, j int) bool { return configs[i].Resource < configs[j].Resource })
	return addonv1alpha1.PlacementStrategy{
		PlacementRef: addonv1alpha1.PlacementRef{Namespace: placement.Namespace, Name: placement.Name},
		Configs:      configs,
		// DeepCopy so the caller's pointers (All, Progressive, ...) are not shared.
		RolloutStrategy: *rollout.DeepCopy(),
	}
}
