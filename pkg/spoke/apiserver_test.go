package spoke_test

import (
	"bytes"
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// The API server takes the largest template (autonomous mode, every CRD) of every paired
// release as one object and gives it back byte for byte, so the reconciler's compare-then-write
// sees no difference on a resync.
func TestTemplateRoundTripsThroughTheAPIServer(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{})
	ctx := context.Background()
	for _, release := range version.ArgoCDVersions() {
		for _, mode := range []string{addon.ModeManaged, addon.ModeAutonomous} {
			roundTrip(ctx, t, env, release, mode)
		}
	}
}

func roundTrip(ctx context.Context, t *testing.T, env *testenv.Env, release, mode string) {
	t.Helper()
	tpl, err := spoke.BuildAddOnTemplate(spoke.Input{TemplateName: "components-" + release + "-" + mode, AddonName: "argocd-agent-addon-argocd",
		ArgoCDVersion: release, Mode: mode, ImagePullSecrets: []string{"regcred"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, tpl.DeepCopy()); err != nil {
		t.Fatalf("%s: the API server refuses the template: %v", tpl.Name, err)
	}
	got := &addonv1alpha1.AddOnTemplate{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: tpl.Name}, got); err != nil {
		t.Fatal(err)
	}
	for i, m := range tpl.Spec.AgentSpec.Workload.Manifests {
		if have := got.Spec.AgentSpec.Workload.Manifests[i].Raw; !bytes.Equal(have, m.Raw) {
			n := min(len(have), len(m.Raw))
			at := 0
			for at < n && have[at] == m.Raw[at] {
				at++
			}
			t.Errorf("%s: manifest %d comes back changed at byte %d:\n sent %s\n got  %s", tpl.Name, i, at,
				m.Raw[max(0, at-80):min(len(m.Raw), at+80)], have[max(0, at-80):min(len(have), at+80)])
		}
	}
	if !equality.Semantic.DeepEqual(got.Spec, tpl.Spec) {
		t.Errorf("%s: the stored spec differs from the built one: manifest configs %+v, sent %+v", tpl.Name, got.Spec.AgentSpec.ManifestConfigs, tpl.Spec.AgentSpec.ManifestConfigs)
	}
}
