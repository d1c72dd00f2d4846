package addon_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
)

// TestAgentCallRowsSayWhatTheirCallsAre: each row of the docs' table names the verbs of its calls
// and the source files they come from, and each call of a row is made by some release and mode;
// every supported release has its calls read.
func TestAgentCallRowsSayWhatTheirCallsAre(t *testing.T) {
	for _, p := range version.Pairs() {
		if !slices.Contains(addon.AgentCallReleases, p.Agent) {
			t.Errorf("argocd-agent %s is supported, but its agent's calls were not read", p.Agent)
		}
	}
	for _, row := range addon.AgentCallRows {
		verbs := strings.FieldsFunc(row.Verbs, func(r rune) bool { return r == ',' || r == ';' || r == ' ' })
		if len(row.Calls) == 0 {
			t.Errorf("row %q has no calls", row.Objects)
		}
		for _, c := range row.Calls {
			if !slices.Contains(verbs, c.Verb) {
				t.Errorf("row %q: its verbs %q miss %s (%s)", row.Objects, row.Verbs, c.Verb, c.Path)
			}
			if c.Source == "" || !strings.Contains(row.Where, "`"+c.Source+"`") {
				t.Errorf("row %q: %s comes from %q, which the row's where (%q) does not name", row.Objects, c.Path, c.Source, row.Where)
			}
			made := false
			for _, r := range addon.AgentCallReleases {
				for _, m := range []string{addon.ModeManaged, addon.ModeAutonomous} {
					made = made || c.MadeIn(r, m, true)
				}
			}
			if !made {
				t.Errorf("row %q: %s is made by no release", row.Objects, c.Path)
			}
		}
		for _, v := range verbs {
			if !slices.ContainsFunc(row.Calls, func(c addon.AgentCall) bool { return c.Verb == v }) {
				t.Errorf("row %q says %s, which none of its calls is", row.Objects, v)
			}
		}
	}
}
