package addon

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

func TestBuildClusterManagementAddOn(t *testing.T) {
	cma := BuildClusterManagementAddOn("argocd-agent-addon", "Argo CD agent")
	if cma.Name != "argocd-agent-addon" || cma.Namespace != "" {
		t.Errorf("CMA %s/%s", cma.Namespace, cma.Name)
	}
	if cma.Kind != "ClusterManagementAddOn" || cma.APIVersion != "addon.open-cluster-management.io/v1alpha1" {
		t.Errorf("type meta %+v", cma.TypeMeta)
	}
	if cma.Spec.AddOnMeta.DisplayName != "Argo CD agent" {
		t.Errorf("display name %q", cma.Spec.AddOnMeta.DisplayName)
	}
	if got := cma.Annotations["addon.open-cluster-management.io/lifecycle"]; got != "addon-manager" {
		t.Errorf("lifecycle annotation %q, want addon-manager", got)
	}
	if cma.Spec.InstallStrategy.Type != "Placements" {
		t.Errorf("install strategy %q, want Placements", cma.Spec.InstallStrategy.Type)
	}
	if len(cma.Spec.InstallStrategy.Placements) != 0 {
		t.Errorf("placements must start empty, got %+v", cma.Spec.InstallStrategy.Placements)
	}
	want := []addonv1alpha1.ConfigMeta{
		{ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: "addon.open-cluster-management.io", Resource: "addondeploymentconfigs"}},
		{ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: "addon.open-cluster-management.io", Resource: "addontemplates"}},
	}
	//lint:ignore SA1019 supportedConfigs is how OCM v1alpha1 marks a template-based addon.
	got := cma.Spec.SupportedConfigs
	if len(got) != len(want) {
		t.Fatalf("supported configs %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].ConfigGroupResource != want[i].ConfigGroupResource || got[i].DefaultConfig != nil {
			t.Errorf("supported config %d = %+v, want %+v without default", i, got[i], want[i])
		}
	}
	a, _ := json.Marshal(cma)
	b, _ := json.Marshal(BuildClusterManagementAddOn("argocd-agent-addon", "Argo CD agent"))
	if string(a) != string(b) {
		t.Errorf("CMA is not deterministic")
	}
}

func TestBuildPlacementStrategy(t *testing.T) {
	placement := types.NamespacedName{Namespace: "open-cluster-management", Name: "argocd-placement"}
	adc := types.NamespacedName{Namespace: "open-cluster-management", Name: "my-gitops-cluster"}

	strategies := map[string]clusterv1alpha1.RolloutStrategy{
		"all": {Type: clusterv1alpha1.All, All: &clusterv1alpha1.RolloutAll{
			RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "10m"},
		}},
		"progressive": {Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
			MaxConcurrency: intstr.FromString("25%"),
			RolloutConfig:  clusterv1alpha1.RolloutConfig{MaxFailures: intstr.FromInt32(2)},
		}},
		"progressive absolute": {Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
			MaxConcurrency: intstr.FromInt32(3),
		}},
	}
	for name, rollout := range strategies {
		t.Run(name, func(t *testing.T) {
			ps := BuildPlacementStrategy(placement, "argocd-agent-template", adc, rollout)
			if ps.Namespace != placement.Namespace || ps.Name != placement.Name {
				t.Errorf("placement ref %+v", ps.PlacementRef)
			}
			wantConfigs := []addonv1alpha1.AddOnConfig{
				{
					ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: "addon.open-cluster-management.io", Resource: "addondeploymentconfigs"},
					ConfigReferent:      addonv1alpha1.ConfigReferent{Namespace: adc.Namespace, Name: adc.Name},
				},
				{
					ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: "addon.open-cluster-management.io", Resource: "addontemplates"},
					ConfigReferent:      addonv1alpha1.ConfigReferent{Name: "argocd-agent-template"},
				},
			}
			if len(ps.Configs) != len(wantConfigs) {
				t.Fatalf("configs %+v", ps.Configs)
			}
			for i := range wantConfigs {
				if ps.Configs[i] != wantConfigs[i] {
					t.Errorf("config %d = %+v, want %+v", i, ps.Configs[i], wantConfigs[i])
				}
			}
			gotJSON, _ := json.Marshal(ps.RolloutStrategy)
			wantJSON, _ := json.Marshal(rollout)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("rollout %s, want %s", gotJSON, wantJSON)
			}
			if rollout.Progressive != nil {
				if ps.RolloutStrategy.Progressive == rollout.Progressive {
					t.Errorf("rollout strategy shares the caller's pointer")
				}
				if ps.RolloutStrategy.Progressive.MaxConcurrency != rollout.Progressive.MaxConcurrency {
					t.Errorf("maxConcurrency %v, want %v", ps.RolloutStrategy.Progressive.MaxConcurrency, rollout.Progressive.MaxConcurrency)
				}
			}
			if ps.RolloutStrategy.Type != rollout.Type {
				t.Errorf("type %q, want %q", ps.RolloutStrategy.Type, rollout.Type)
			}
		})
	}
}
