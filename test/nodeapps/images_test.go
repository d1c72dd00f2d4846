package nodeapps

import (
	"slices"
	"testing"
)

// The fleet's registry holds the Argo CD images of every paired release under the names the
// components addon's manifests give them, each name once: a GitOpsCluster whose agents run
// v0.9.0 gets v3.4.3's components, the default pair v3.5.0's.
func TestTagsCoverEveryPairedArgoCD(t *testing.T) {
	imgs := Images{Manager: "m.tar", ArgoCD: "argocd.tar", Redis: "redis.tar", Hello: "hello.tar", Agent: "agent.tar", ManagerTag: "dev"}
	refs := imgs.Refs("10.0.0.1:5000")
	for _, want := range []string{"10.0.0.1:5000/argoproj/argocd:v3.5.0", "10.0.0.1:5000/argoproj/argocd:v3.4.3",
		"10.0.0.1:5000/docker/library/redis:8.2.3-alpine", "10.0.0.1:5000/e2e/argocd-agent-standin:v0.10.0"} {
		if !slices.Contains(refs, want) {
			t.Errorf("%s is not among %v", want, refs)
		}
	}
	seen := map[string]bool{}
	for _, r := range refs {
		if seen[r] {
			t.Errorf("%s is added twice", r)
		}
		seen[r] = true
	}
	for _, img := range imgs.Tags("10.0.0.1:5000") {
		if img.Ref == "10.0.0.1:5000/argoproj/argocd:v3.4.3" && img.Tar != "argocd.tar" {
			t.Errorf("v3.4.3 is tagged from %s", img.Tar)
		}
	}
}
