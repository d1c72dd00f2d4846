package chart

import (
	"slices"
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
)

// TestRenderLetsTheManagerReadTheCRDsItChecks: the manager reads the project's CRDs at start
// to say when an upgrade left them older than itself; its ClusterRole must let it get each one
// it reads, the pull model's report CRD included while the pull model is on, or every start
// logs a refusal instead of the check.
func TestRenderLetsTheManagerReadTheCRDsItChecks(t *testing.T) {
	for _, pullModel := range []bool{true, false} {
		objs, err := render(t, map[string]any{"pullModel": map[string]any{"enabled": pullModel}})
		if err != nil {
			t.Fatal(err)
		}
		var readable []string
		for _, r := range clusterRole(t, objs, releaseName).Rules {
			if slices.Contains(r.APIGroups, "apiextensions.k8s.io") && slices.Contains(r.Resources, "customresourcedefinitions") && slices.Contains(r.Verbs, "get") {
				readable = append(readable, r.ResourceNames...)
			}
		}
		for _, crd := range manager.CheckedCRDs(pullModel) {
			if !slices.Contains(readable, crd) {
				t.Errorf("pullModel.enabled=%v: the manager reads CRD %s at start, and its ClusterRole does not let it (it may get %v)", pullModel, crd, readable)
			}
		}
	}
}
