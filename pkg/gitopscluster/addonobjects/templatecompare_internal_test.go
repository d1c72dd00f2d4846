package addonobjects

import (
	"testing"

	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
)

func componentsTemplate(t testing.TB, mode string) *addonv1alpha1.AddOnTemplate {
	t.Helper()
	tmpl, err := spoke.BuildAddOnTemplate(spoke.Input{TemplateName: "argocd-components-a.b", AddonName: "argocd-agent-addon-argocd", Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func TestTemplateSpecsEqual(t *testing.T) {
	base := componentsTemplate(t, addon.ModeAutonomous)
	cases := map[string]struct {
		change func(s *addonv1alpha1.AddOnTemplateSpec)
		equal  bool
	}{
		"same": {func(*addonv1alpha1.AddOnTemplateSpec) {}, true},
		"one byte of one manifest": {func(s *addonv1alpha1.AddOnTemplateSpec) {
			m := s.AgentSpec.Workload.Manifests
			m[len(m)/2].Raw[len(m[len(m)/2].Raw)-2] ^= 1
		}, false},
		"a manifest less": {func(s *addonv1alpha1.AddOnTemplateSpec) {
			s.AgentSpec.Workload.Manifests = s.AgentSpec.Workload.Manifests[1:]
		}, false},
		"the addon name": {func(s *addonv1alpha1.AddOnTemplateSpec) { s.AddonName = "other" }, false},
		"a registration": {func(s *addonv1alpha1.AddOnTemplateSpec) {
			s.Registration = []addonv1alpha1.RegistrationSpec{{Type: addonv1alpha1.RegistrationTypeKubeClient}}
		}, false},
		"empty registrations against none": {func(s *addonv1alpha1.AddOnTemplateSpec) {
			s.Registration = []addonv1alpha1.RegistrationSpec{}
		}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			changed := componentsTemplate(t, addon.ModeAutonomous)
			tc.change(&changed.Spec)
			if got := templateSpecsEqual(&base.Spec, &changed.Spec); got != tc.equal {
				t.Errorf("templateSpecsEqual = %v, want %v", got, tc.equal)
			}
			if got := templateSpecsEqual(&changed.Spec, &base.Spec); got != tc.equal {
				t.Errorf("templateSpecsEqual reversed = %v, want %v", got, tc.equal)
			}
		})
	}
	// The builder hands out copies: changing one template must not reach the next.
	again := componentsTemplate(t, addon.ModeAutonomous)
	if !templateSpecsEqual(&base.Spec, &again.Spec) {
		t.Error("a change to one built template reached a later build")
	}
}

// BenchmarkUnchangedComponentsTemplate is the cost of what every reconcile of a GitOpsCluster does
// to its components template when nothing changed: build it and compare it with the cached copy.
func BenchmarkUnchangedComponentsTemplate(b *testing.B) {
	live := componentsTemplate(b, addon.ModeAutonomous)
	b.ReportAllocs()
	for b.Loop() {
		tmpl := componentsTemplate(b, addon.ModeAutonomous)
		if !templateSpecsEqual(&live.Spec, &tmpl.Spec) {
			b.Fatal("unequal")
		}
	}
}
