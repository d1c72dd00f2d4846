package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// Scenario 4: renew cluster1's agent client certificate and restart the agent with it.
//
// Everything here runs as on a cluster: OCM's registration agent on cluster1 notices that the
// client certificate secret is gone, makes a new key and CSR on the hub, this project's signer
// checks and signs it, and the registration agent writes the new certificate into the secret on
// cluster1; the kubelet updates the agent pod's secret volume (at its next sync of the pod, up
// to a minute); the cert-reloader sidecar (the project's image) sees the new files and sends
// SIGTERM to the agent process, found through the pod's shared process namespace; the kubelet
// restarts the agent container, which reads the new certificate. The agent is argocd-agent's
// stand-in (test/node/images/argocd-agent): like argocd-agent it reads the certificate once at
// start-up and logs which one, so its container's logs, current and previous, tell the story.
//
// Why the renewal is forced (the secret is deleted) rather than waited for: OCM v1.2.1's
// registration agent renews when 20-25 % of the lifetime is left, but it looks at an addon's
// certificate only on events or at its 5-minute resync (register.ControllerResyncInterval), and
// the signer's minimum lifetime is 1h (--agent-cert-validity). A shorter test-only lifetime
// would still wait for the resync, so no such flag was added; deleting the secret is the path
// OCM takes for "no valid client certificate" and exercises the same CSR, signer and secret
// write as a timed renewal.
func (s *suite) scenarioRotation(t *testing.T) {
	ctx := ctxFor(t)
	const cluster = "cluster1"
	old, sec, err := s.clientCert(ctx, cluster)
	if err != nil {
		t.Fatalf("%s: %v", cluster, err)
	}
	oldFP := pki.Fingerprint(old)
	cs, err := s.clientset(cluster)
	if err != nil {
		t.Fatal(err)
	}

	var pod *corev1.Pod
	var restarts int32
	s.eventually(t, cluster+": agent started with the current certificate, cert-reloader watching", time.Minute, func(ctx context.Context) (bool, string) {
		if pod, err = s.agentPod(ctx, cluster); err != nil {
			return false, err.Error()
		}
		restarts = restartCount(pod, addon.AgentContainerName)
		agentLog, err := containerLog(ctx, cs, pod, addon.AgentContainerName, false)
		if err != nil {
			return false, err.Error()
		}
		reloaderLog, err := containerLog(ctx, cs, pod, addon.ReloaderContainerName, false)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(agentLog, "loaded certificate "+oldFP) && strings.Contains(reloaderLog, "watching"),
			fmt.Sprintf("agent log:\n%s\nreloader log:\n%s", agentLog, reloaderLog)
	})

	// Force the renewal on cluster1 (see above).
	start := time.Now()
	if err := s.spokes[cluster].Delete(ctx, &corev1.Secret{ObjectMeta: sec.ObjectMeta}); err != nil {
		t.Fatal(err)
	}
	renewed := s.waitClientCert(t, cluster, oldFP)
	newFP := pki.Fingerprint(renewed)
	t.Logf("%s: certificate renewed by OCM + this project's signer in %s (old %s…, new %s…)", cluster,
		time.Since(start).Round(100*time.Millisecond), oldFP[:16], newFP[:16])

	s.eventually(t, cluster+": kubelet updated the volume, cert-reloader restarted the agent, which loaded the new certificate", 4*time.Minute,
		func(ctx context.Context) (bool, string) {
			p := &corev1.Pod{}
			if err := s.spokes[cluster].Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
				return false, err.Error()
			}
			n := restartCount(p, addon.AgentContainerName)
			if n == restarts {
				return false, fmt.Sprintf("agent container restarted %d times, as before the renewal", n)
			}
			agentLog, err := containerLog(ctx, cs, p, addon.AgentContainerName, false)
			if err != nil {
				return false, err.Error()
			}
			return strings.Contains(agentLog, "loaded certificate "+newFP), "agent log:\n" + agentLog
		})
	p := &corev1.Pod{}
	if err := s.spokes[cluster].Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
		t.Fatal(err)
	}
	if n := restartCount(p, addon.AgentContainerName); n != restarts+1 {
		t.Errorf("the agent container restarted %d times for one renewal, want once", n-restarts)
	}
	if n := restartCount(p, addon.ReloaderContainerName); n != 0 {
		t.Errorf("the cert-reloader container restarted %d times", n)
	}
	// The previous instance ended on the reloader's SIGTERM: the stand-in exits 0 on it, where
	// a crash or the kubelet's kill would not.
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == addon.AgentContainerName {
			if last := st.LastTerminationState.Terminated; last == nil || last.ExitCode != 0 {
				t.Errorf("the agent's previous instance should have exited 0 on SIGTERM from the reloader; last state %+v", st.LastTerminationState)
			}
		}
	}
	// Its log, while the kubelet still keeps the dead container.
	if previous, err := containerLog(ctx, cs, p, addon.AgentContainerName, true); err != nil {
		t.Logf("the previous instance's log is gone (%v)", err)
	} else if !strings.Contains(previous, "loaded certificate "+oldFP) || !strings.Contains(previous, "got terminated") {
		t.Errorf("the agent's previous instance should have run with the old certificate and ended on SIGTERM from the reloader; its log:\n%s", previous)
	}
	reloaderLog, err := containerLog(ctx, cs, p, addon.ReloaderContainerName, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reloaderLog, "certificate changed; restarting") {
		t.Errorf("the cert-reloader did not log the restart; its log:\n%s", reloaderLog)
	}
	if ledger, err := s.ledger(ctx, cluster); err != nil {
		t.Error(err)
	} else if _, ok := ledger[oldFP]; !ok {
		t.Errorf("the replaced certificate %s left the ledger before it expired: it could not be revoked", oldFP)
	}
}

// agentPod is the running pod of the agent Deployment on cluster.
func (s *suite) agentPod(ctx context.Context, cluster string) (*corev1.Pod, error) {
	d := &appsv1.Deployment{}
	if err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: agentNS, Name: addon.AgentName}, d); err != nil {
		return nil, err
	}
	pods := &corev1.PodList{}
	if err := s.spokes[cluster].List(ctx, pods, client.InNamespace(agentNS), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		return nil, err
	}
	var running []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		return nil, fmt.Errorf("%d running agent pods, want 1", len(running))
	}
	return running[0], nil
}

func restartCount(p *corev1.Pod, container string) int32 {
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == container {
			return st.RestartCount
		}
	}
	return 0
}
