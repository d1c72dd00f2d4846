package addonobjects

import (
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
)

// TestDecideClearance is the components' clearance rule for one cluster, case by case.
func TestDecideClearance(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   clearanceInput
		want clearance
		own  bool // keepsItsOwn
	}{
		{"the GitOpsCluster installs no components", clearanceInput{install: false, verdict: spoke.ProbeClear}, notCleared, true},
		{"the cluster keeps its own Argo CD by label", clearanceInput{install: true, ownArgoCD: true, verdict: spoke.ProbeClear, labelled: true}, notCleared, true},
		{"nothing there", clearanceInput{install: true, verdict: spoke.ProbeClear}, clearedNow, false},
		{"another Argo CD there", clearanceInput{install: true, verdict: spoke.ProbeForeign}, notCleared, true},
		{"another Argo CD there, Replace", clearanceInput{install: true, replace: true, verdict: spoke.ProbeForeign}, clearedNow, false},
		{"another Argo CD reported where the components run", clearanceInput{install: true, labelled: true, verdict: spoke.ProbeForeign}, clearedNow, true},
		{"no answer yet, Replace", clearanceInput{install: true, replace: true, verdict: spoke.ProbeUnknown}, clearedNow, false},
		{"no answer yet, cleared before (probe recreated)", clearanceInput{install: true, labelled: true, verdict: spoke.ProbeUnknown}, clearedNow, false},
		{"no answer yet", clearanceInput{install: true, verdict: spoke.ProbeUnknown}, clearedIfInstalled, false},
	} {
		if got := decideClearance(tc.in); got != tc.want {
			t.Errorf("%s: clearance %d, want %d", tc.name, got, tc.want)
		}
		if got := tc.in.keepsItsOwn(); got != tc.own {
			t.Errorf("%s: keepsItsOwn %v, want %v", tc.name, got, tc.own)
		}
	}
}
