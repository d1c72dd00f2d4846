package manager_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoControllerImportsAnother: each controller's package depends on shared libraries (names,
// fleet, ledger, pki, ...) and never on another controller, so a rule both need has one home
// outside either. The pull model's controllers count as one family.
func TestNoControllerImportsAnother(t *testing.T) {
	const mod = "github.com/argocd-agent-addon/argocd-agent-addon/"
	families := map[string][]string{
		"gitopscluster":       {"pkg/gitopscluster"},
		"signer":              {"pkg/signer"},
		"pull-model clusters": {"pkg/pullmodel/clusters"},
		"pull model":          {"pkg/pullmodel/propagation", "pkg/pullmodel/status", "pkg/pullmodel/report"},
	}
	familyOf := map[string]string{}
	for f, pkgs := range families {
		for _, p := range pkgs {
			familyOf[mod+p] = f
		}
	}
	for f, pkgs := range families {
		for _, p := range pkgs {
			out, err := exec.Command("go", "list", "-deps", mod+p).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", p, err)
			}
			for _, dep := range strings.Fields(string(out)) {
				if other, ok := familyOf[dep]; ok && other != f {
					t.Errorf("%s (%s) depends on %s (%s)", p, f, strings.TrimPrefix(dep, mod), other)
				}
			}
		}
	}
}
