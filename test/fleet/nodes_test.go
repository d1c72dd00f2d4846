package fleet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// SkipUnlessRealNodes skips a test that starts real nodes unless FLEET_REAL_NODES=1, and fails
// it when they were asked for and cannot run here.
func skipUnlessRealNodes(t *testing.T) {
	t.Helper()
	fleet.SkipIfDisabled(t)
	node.RequireForTest(t)
}

// TestFleetRealNodes starts a hub and one managed cluster on real nodes and runs a Deployment
// from the fleet's registry on the managed cluster, behind a Service that a pod on the same
// node reaches, then checks that Stop leaves nothing of the nodes behind.
func TestFleetRealNodes(t *testing.T) {
	skipUnlessRealNodes(t)
	f := fleet.StartForTest(t, fleet.Options{Clusters: []string{"cluster1"}, BindingNamespace: "fleet-nodes", RealNodes: true})
	t.Logf("fleet with real nodes up in %s", f.UpTime.Round(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The cluster set is joined as without nodes; the managed cluster's API server is on its
	// node's host address.
	if !strings.Contains(f.SpokeConfig("cluster1").Host, f.NodeOf("cluster1").HostIP()) {
		t.Errorf("cluster1's API server is at %s, not on its node's host address %s", f.SpokeConfig("cluster1").Host, f.NodeOf("cluster1").HostIP())
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "hello")
	if err := node.BuildStatic(testenv.RepoRoot(), "./test/node/images/hello", bin); err != nil {
		t.Fatal(err)
	}
	image := f.RegistryHost() + "/fleet-test/hello:1"
	tarPath := filepath.Join(dir, "hello.tar")
	if err := node.WriteImage(tarPath, node.ImageSpec{Ref: image, Binary: bin, UID: 65532}); err != nil {
		t.Fatal(err)
	}
	if err := f.AddImage(ctx, tarPath); err != nil {
		t.Fatal(err)
	}

	c, err := f.SpokeClient("cluster1")
	if err != nil {
		t.Fatal(err)
	}
	ns := "fleet-nodes-test"
	if err := fleet.EnsureNamespaces(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns}, StringData: map[string]string{"token": "t0k"}}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "hello"}
	nonRoot := true
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot},
					Containers: []corev1.Container{{
						Name: "hello", Image: image,
						// Always, as Argo CD's own manifests: the fleet's registry answers.
						ImagePullPolicy: corev1.PullAlways,
						Env:             []corev1.EnvVar{{Name: "GREETING", Value: "from-a-deployment"}, {Name: "SECRET_FILE", Value: "/secret/token"}},
						Ports:           []corev1.ContainerPort{{ContainerPort: 8080}},
						VolumeMounts:    []corev1.VolumeMount{{Name: "secret", MountPath: "/secret", ReadOnly: true}},
						ReadinessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 2},
					}},
					Volumes: []corev1.Volume{{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "hello"}}}},
				},
			},
		},
	}
	if err := c.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, f, "Deployment hello available", func() (bool, error) {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas == 1, fmt.Errorf("status %+v", d.Status.Conditions)
	})
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, svc); err != nil {
		t.Fatal(err)
	}
	// kube-proxy's rules live in the node's namespace: the ClusterIP answers there.
	// kube-proxy's rules live in the node's namespace: the ClusterIP answers there once the
	// EndpointSlice has the ready pod.
	waitFor(ctx, t, f, "the Service's ClusterIP answering on the node", func() (bool, error) {
		out, err := f.NodeOf("cluster1").InNetns(bin, "-get", "http://"+svc.Spec.ClusterIP+"/").CombinedOutput()
		return err == nil && strings.Contains(string(out), "greeting=from-a-deployment secret=t0k uid=65532"), fmt.Errorf("%v: %s", err, out)
	})
	// A Service address without a Service goes nowhere: the node's guard refuses it instead of
	// handing it to the host.
	before, err := f.NodeOf("cluster1").GuardRejected()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := f.NodeOf("cluster1").InNetns(bin, "-get", "http://10.0.0.250/").CombinedOutput(); err == nil || !strings.Contains(string(out), "refused") {
		t.Errorf("GET an unused Service address from the node: want connection refused, got %v: %s", err, out)
	}
	if after, err := f.NodeOf("cluster1").GuardRejected(); err != nil || after <= before {
		t.Errorf("the node's guard counted %d rejected packets, %d before (%v)", after, before, err)
	}
	// The API server reaches the kubelet for logs by the node's InternalIP.
	cs := kubernetes.NewForConfigOrDie(f.SpokeConfig("cluster1"))
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=hello"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods: %v %v", pods, err)
	}
	logs, err := cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), `greeting "from-a-deployment"`) {
		t.Errorf("pod logs: %v: %s", err, logs)
	}

	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := f.NodeLeftovers(); len(left) > 0 {
		t.Errorf("the nodes left behind:\n%s", strings.Join(left, "\n"))
	}
}

// TestFleetFailingToStartStopsItsNodes: a control plane that fails after its node was made (here
// its etcd exits at once) still has its node stopped: nothing stays mounted in the run folder.
func TestFleetFailingToStartStopsItsNodes(t *testing.T) {
	skipUnlessRealNodes(t)
	bin := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := fleet.Start(ctx, fleet.Options{Dir: dir, Clusters: []string{"cluster1"}, RealNodes: true, K8sBinDir: bin})
	if err == nil {
		_ = f.Stop()
		t.Fatal("the fleet started with an etcd that exits at once")
	}
	// The failure must come after the nodes were made, or there is nothing to check.
	if !strings.Contains(err.Error(), "etcd") || strings.Contains(err.Error(), "preparing its node") {
		t.Fatalf("the start failed elsewhere than at etcd: %v", err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			t.Errorf("still mounted after the failed start: %s", fields[4])
		}
	}
}
