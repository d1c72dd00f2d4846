package revocation

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
)

func TestJudgeWave(t *testing.T) {
	goc := types.NamespacedName{Namespace: "team", Name: "fleet"}
	for _, tc := range []struct {
		name            string
		wave            Wave
		tripped, paused bool
	}{
		{"within the limit", Wave{Leaving: 2, Agents: 10, MaxPercent: 20}, false, false},
		{"at the limit exactly", Wave{Leaving: 5, Agents: 10, MaxPercent: 50}, false, false},
		{"over the limit", Wave{Leaving: 6, Agents: 10, MaxPercent: 50}, true, true},
		{"over the limit, that count approved", Wave{Leaving: 6, Agents: 10, MaxPercent: 50, Approval: "6"}, true, false},
		{"over the limit, another count approved", Wave{Leaving: 7, Agents: 10, MaxPercent: 50, Approval: "6"}, true, true},
		{"breaker off at 0", Wave{Leaving: 10, Agents: 10, MaxPercent: 0}, false, false},
		{"breaker off at 100", Wave{Leaving: 10, Agents: 10, MaxPercent: 100}, false, false},
		{"no agents", Wave{Leaving: 1, Agents: 0, MaxPercent: 10}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.wave.GitOpsCluster, tc.wave.Settle = goc, time.Minute
			got := judgeWave(tc.wave)
			if got.Tripped != tc.tripped || (got.Paused != "") != tc.paused {
				t.Fatalf("judgeWave(%+v) = %+v, want tripped %v, paused %v", tc.wave, got, tc.tripped, tc.paused)
			}
			if tc.paused && !strings.Contains(got.Paused, "kubectl annotate gitopscluster -n team fleet "+v1alpha1.AnnotationApproveRevocation+"=") {
				t.Errorf("the pause does not say how to approve: %s", got.Paused)
			}
		})
	}
}

func TestBlocklistRoom(t *testing.T) {
	near := ledger.BlocklistBudget * blocklistNearFullPercent / 100
	full := &metav1.Condition{Reason: v1alpha1.ReasonBlocklistFull}
	for _, tc := range []struct {
		name   string
		prev   *metav1.Condition
		res    Result
		ok     bool
		reason string
	}{
		{"empty", nil, Result{}, true, v1alpha1.ReasonBlocklistWithinCapacity},
		{"below the mark", nil, Result{BlocklistBytes: near - 1}, true, v1alpha1.ReasonBlocklistWithinCapacity},
		{"at the mark", nil, Result{BlocklistBytes: near}, false, v1alpha1.ReasonBlocklistNearFull},
		{"a key found no room", nil, Result{BlocklistFull: true}, false, v1alpha1.ReasonBlocklistFull},
		// The passes between a full one and a retry that blocks what waits stay Full.
		{"still full while keys wait", full, Result{BlocklistBytes: near, AwaitingBlock: 3}, false, v1alpha1.ReasonBlocklistFull},
		{"room made", full, Result{BlocklistBytes: near - 1, AwaitingBlock: 3}, true, v1alpha1.ReasonBlocklistWithinCapacity},
		{"nothing waits any more", full, Result{BlocklistBytes: near}, false, v1alpha1.ReasonBlocklistNearFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason, msg := blocklistRoom(tc.prev, "principal", tc.res)
			if ok != tc.ok || reason != tc.reason {
				t.Fatalf("blocklistRoom = %v, %s (%s); want %v, %s", ok, reason, msg, tc.ok, tc.reason)
			}
			if !strings.Contains(msg, "principal/"+ledger.BlocklistName) {
				t.Errorf("the message does not name the blocklist: %s", msg)
			}
		})
	}
}
