package addonobjects

import (
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// TestReportForeignEventsOnTransition: the probes' findings become Events only when they grow,
// returned for the pass to emit, never once per pass.
func TestReportForeignEventsOnTransition(t *testing.T) {
	found := []v1alpha1.FoundArgoCD{{Cluster: "c1", Found: "argocd-application-controller v3.3.0"}}
	reasons := func(goc *v1alpha1.GitOpsCluster, rep ForeignReport) []string {
		var out []string
		for _, e := range (&Prober{}).ReportForeign(goc, goc.Status.DeepCopy(), rep, func(string, bool, string, string) {}) {
			out = append(out, e.Type+"/"+e.Reason)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		before v1alpha1.GitOpsClusterStatus
		rep    ForeignReport
		want   []string
	}{
		{name: "nothing found", rep: ForeignReport{}, want: nil},
		{name: "a foreign Argo CD appears", rep: ForeignReport{foreign: found}, want: []string{"Warning/ForeignArgoCDFound"}},
		{name: "the same one again", before: v1alpha1.GitOpsClusterStatus{ForeignArgoCDClusters: 1, ForeignArgoCD: found},
			rep: ForeignReport{foreign: found}, want: nil},
		{name: "a cluster's own Argo CD at another release appears", rep: ForeignReport{otherVersion: found}, want: []string{"Warning/ArgoCDVersionSkew"}},
		{name: "the same skew again", before: v1alpha1.GitOpsClusterStatus{OtherArgoCDVersionClusters: 1},
			rep: ForeignReport{otherVersion: found}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			goc := &v1alpha1.GitOpsCluster{Status: tc.before}
			got := reasons(goc, tc.rep)
			if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Errorf("events %v, want %v", got, tc.want)
			}
		})
	}
}
