package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// testManagerPodSpec checks the chart's manager as the pod it is: the release's Services reach
// the ready pod, and the checks the suite relies on fail on a broken pod spec. A readiness probe on
// a port nothing listens on keeps the new pod unready (a rollout counts as done only as
// `kubectl rollout status` decides), with an Unhealthy event naming the probe; putting the
// chart's probe back completes the rollout.
func testManagerPodSpec(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	var services []string
	// The release's own: the scenarios put other Services there (a principal's, with no pod).
	release := map[string]string{"app.kubernetes.io/instance": testenv.ChartRelease}
	s.eventually(t, "hub: every Service of the chart's release reaches a ready pod", 2*time.Minute, func(ctx context.Context) (bool, string) {
		ok, checked, state := nodeapps.ServicesReachPods(ctx, s.f, "hub", ns, release)
		services = checked
		return ok, state
	})
	t.Logf("hub: Services with ready pods: %v", services)

	d := &appsv1.Deployment{}
	if err := s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.ChartRelease}, d); err != nil {
		t.Fatal(err)
	}
	chart := d.DeepCopy()
	broken := d.DeepCopy()
	probe := broken.Spec.Template.Spec.Containers[0].ReadinessProbe
	if probe == nil || probe.HTTPGet == nil {
		t.Fatalf("the chart's manager has no HTTP readiness probe: %+v", probe)
	}
	const brokenPort = 1
	probe.HTTPGet.Port = intstr.FromInt32(brokenPort)
	probe.PeriodSeconds, probe.FailureThreshold = 1, 1
	if err := s.hub.Patch(ctx, broken, client.MergeFrom(d)); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		cur := &appsv1.Deployment{}
		if err := s.hub.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Template = chart.Spec.Template
		if err := s.hub.Patch(ctx, cur, patch); err != nil {
			t.Fatal(err)
		}
		s.eventually(t, "hub: the manager rolled back to the chart's probe", 3*time.Minute, func(ctx context.Context) (bool, string) {
			return fleet.WorkloadReady(ctx, s.hub, &appsv1.Deployment{ObjectMeta: d.ObjectMeta})
		})
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			restore()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ok, _ := fleet.WorkloadReady(ctx, s.hub, &appsv1.Deployment{ObjectMeta: d.ObjectMeta}); ok {
			t.Fatalf("a manager whose readiness probe targets port 1 reads as ready")
		}
		time.Sleep(2 * time.Second)
	}
	s.eventually(t, "hub: an Unhealthy event names the failed readiness probe", time.Minute, func(ctx context.Context) (bool, string) {
		events := &corev1.EventList{}
		if err := s.hub.List(ctx, events, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var reasons []string
		for _, e := range events.Items {
			// Only the broken probe's port: an Unhealthy event of an earlier restart of the
			// manager in this lane names the chart's.
			if e.Reason == "Unhealthy" && strings.Contains(e.Message, "Readiness probe failed") && strings.Contains(e.Message, fmt.Sprintf(":%d/", brokenPort)) {
				return true, ""
			}
			reasons = append(reasons, e.Reason)
		}
		return false, fmt.Sprintf("event reasons %v", reasons)
	})
	t.Logf("a readiness probe broken on purpose keeps the manager's new pod unready:\n%s", nodeapps.PodReport(ctx, s.f, "hub", ns))
	restore()
	restored = true
}
