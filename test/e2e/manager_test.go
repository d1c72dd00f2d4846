package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// managerContainer is the chart's manager container.
const managerContainer = "manager"

// managerPod is the running pod of the chart's manager Deployment.
func (s *suite) managerPod(ctx context.Context) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := s.hub.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(s.managerSelector(ctx))); err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running pod of Deployment %s/%s among %d", ns, testenv.ChartRelease, len(pods.Items))
}

// containerLog reads a container's log through the API server (the kubelet serves it), as
// `kubectl logs [--previous]` does.
func containerLog(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, container string, previous bool) (string, error) {
	rc, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, Previous: previous}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 64<<20))
	return string(b), err
}

// logArgoCDTail logs, when t has failed, the last lines of each running pod of an Argo CD
// component on cluster ("hub" or a managed cluster): the reason Argo CD did or did not act is
// there, and its pods go with the scenario's cleanup.
func (s *suite) logArgoCDTail(t *testing.T, cluster, component string) {
	t.Helper()
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := s.clientset(cluster)
	if err != nil {
		t.Logf("%s: logs of %s: %v", cluster, component, err)
		return
	}
	pods, err := cs.CoreV1().Pods(fleet.ArgoCDNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + component})
	if err != nil {
		t.Logf("%s: logs of %s: %v", cluster, component, err)
		return
	}
	lines := int64(80)
	for _, p := range pods.Items {
		raw, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &lines}).DoRaw(ctx)
		t.Logf("%s: last %d lines of pod %s (%v):\n%s", cluster, lines, p.Name, err, raw)
	}
}

// clientset is a cluster's ("hub" or a managed cluster) admin clientset, for what
// controller-runtime's client does not do (logs).
func (s *suite) clientset(cluster string) (kubernetes.Interface, error) {
	if cluster == "hub" {
		return kubernetes.NewForConfig(withRequestTimeout(s.f.HubConfig()))
	}
	return kubernetes.NewForConfig(withRequestTimeout(s.f.SpokeConfig(cluster)))
}

// managerLog is the manager's log so far.
func (s *suite) managerLog(ctx context.Context) (string, error) {
	pod, err := s.managerPod(ctx)
	if err != nil {
		return "", err
	}
	cs, err := s.clientset("hub")
	if err != nil {
		return "", err
	}
	return containerLog(ctx, cs, pod, managerContainer, false)
}

// managerRestarts says how often the manager's container restarted, with the end of the
// previous instance's log when it did: a manager that crashed fails the run, as its process
// dying did before it ran as a pod.
func (s *suite) managerRestarts(ctx context.Context) (int32, string) {
	pod, err := s.managerPod(ctx)
	if err != nil {
		return 0, err.Error()
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name != managerContainer || st.RestartCount == 0 {
			continue
		}
		cs, err := s.clientset("hub")
		if err != nil {
			return st.RestartCount, err.Error()
		}
		prev, err := containerLog(ctx, cs, pod, managerContainer, true)
		if err != nil {
			return st.RestartCount, err.Error()
		}
		lines := strings.Split(strings.TrimRight(prev, "\n"), "\n")
		return st.RestartCount, strings.Join(lines[max(0, len(lines)-30):], "\n")
	}
	return 0, ""
}

// keepManagerLog writes the manager's log beside the fleet's process logs, and reports a
// manager that restarted.
func (s *suite) keepManagerLog() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log, err := s.managerLog(ctx)
	if err != nil {
		return fmt.Errorf("reading the manager's log: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.f.LogDir(), "argocd-agent-addon-manager.log"), []byte(log), 0o644); err != nil {
		return err
	}
	if n, prev := s.managerRestarts(ctx); n > 0 {
		return fmt.Errorf("the manager's container restarted %d times; the end of its previous log:\n%s", n, prev)
	}
	return nil
}

// stopManager scales the chart's manager Deployment to no replica, as a hub admin stops it,
// and waits until its pod is gone; the function it returns scales it back and waits until the
// manager's pod is ready again.
func (s *suite) stopManager(t *testing.T) (start func()) {
	t.Helper()
	scale := func(replicas int32) {
		ctx := ctxFor(t)
		d := &appsv1.Deployment{}
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.ChartRelease}, d); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To(replicas)
		if err := s.hub.Patch(ctx, d, patch); err != nil {
			t.Fatal(err)
		}
	}
	scale(0)
	s.eventually(t, "hub: the manager's pod gone", 2*time.Minute, func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := s.hub.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(s.managerSelector(ctx))); err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
	return func() {
		scale(1)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: testenv.ChartRelease}}
		s.eventually(t, "hub: the manager's pod ready again", 3*time.Minute, func(ctx context.Context) (bool, string) {
			return fleet.WorkloadReady(ctx, s.hub, d)
		})
	}
}

// managerSelector is the pod selector of the chart's manager Deployment.
func (s *suite) managerSelector(ctx context.Context) map[string]string {
	d := &appsv1.Deployment{}
	if err := s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: testenv.ChartRelease}, d); err != nil || d.Spec.Selector == nil {
		return map[string]string{"no-such-label": "x"}
	}
	return d.Spec.Selector.MatchLabels
}
