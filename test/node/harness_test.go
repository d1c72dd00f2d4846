package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// realCluster is an envtest API server configured as the package doc asks, the controller
// manager and scheduler a real cluster has, and one real node joined to them.
type realCluster struct {
	t       *testing.T
	ctx     context.Context
	root    string // the module's root
	binDir  string // hack/node-binaries.sh's folder
	k8sDir  string // the API server's and controller manager's folder
	scratch string
	node    *node.Node
	env     *testenv.Env
	cs      *kubernetes.Clientset
	stopAll []func()
	stopped bool
}

// requireRealNodes skips t unless real nodes were asked for, and fails it when they were and
// cannot run here.
func requireRealNodes(t *testing.T) {
	t.Helper()
	node.RequireForTest(t)
}

// startRealCluster starts the control plane and a node named name with a free index in
// [lo, hi], and waits until the node is Ready. A cleanup stops whatever is still running and,
// when t failed, logs the end of every process's log.
func startRealCluster(ctx context.Context, t *testing.T, name string, lo, hi int) *realCluster {
	t.Helper()
	c := &realCluster{t: t, ctx: ctx, root: testenv.RepoRoot()}
	c.binDir = nodeBinaries(t, c.root)
	var err error
	if c.k8sDir, err = testenv.BinaryAssets(); err != nil {
		t.Fatal(err)
	}
	c.scratch = t.TempDir()
	nodeDir, err := os.MkdirTemp("", name+"-")
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Prepare(node.Options{Name: name, Index: freeIndex(t, lo, hi), Dir: nodeDir, BinDir: c.binDir, LogDir: filepath.Join(c.scratch, "logs")})
	if err != nil {
		t.Fatal(err)
	}
	c.node = n
	t.Cleanup(func() {
		if !c.stopped {
			c.stopInOrder()
			if err := n.Stop(); err != nil {
				t.Errorf("stopping the node: %v", err)
			}
		}
		if t.Failed() {
			for _, f := range []string{"containerd", "kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"} {
				b, _ := os.ReadFile(filepath.Join(c.scratch, "logs", f+".log"))
				lines := strings.Split(string(b), "\n")
				if len(lines) > 40 {
					lines = lines[len(lines)-40:]
				}
				t.Logf("%s log:\n%s", f, strings.Join(lines, "\n"))
			}
		}
	})

	// The kubelet accepts the API server's client certificate from this CA.
	kcaCert, kcaKey := newCA(t)
	apiClientCert, apiClientKey := issue(t, kcaCert, kcaKey, "kube-apiserver-kubelet-client", "system:masters")
	files := map[string][]byte{"kubelet-ca.crt": pemCert(kcaCert), "kubelet-client.crt": apiClientCert, "kubelet-client.key": apiClientKey}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(c.scratch, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.env, err = testenv.Start(testenv.Options{
		WithoutOCM:         true,
		WithoutProjectCRDs: true,
		APIServerAddress:   n.HostIP(),
		APIServerArgs: map[string]string{
			"authorization-mode":       "Node,RBAC",
			"enable-admission-plugins": "NodeRestriction",
			// envtest turns ServiceAccount admission off; real pods need their token volume.
			"disable-admission-plugins":       "",
			"kubelet-client-certificate":      filepath.Join(c.scratch, "kubelet-client.crt"),
			"kubelet-client-key":              filepath.Join(c.scratch, "kubelet-client.key"),
			"kubelet-preferred-address-types": "InternalIP",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := c.env
	c.stopAll = append(c.stopAll, func() {
		// A stop past testenv's bound means the API server was left waiting on a client or on
		// an address that is gone: stopInOrder's order is wrong.
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the test API server: %v", err)
		}
	})
	api := env.Environment.ControlPlane.APIServer
	issueFn := func(user string, groups ...string) ([]byte, []byte, error) {
		u, err := env.Environment.ControlPlane.AddUser(envtest.User{Name: user, Groups: groups}, nil)
		if err != nil {
			return nil, nil, err
		}
		return u.Config().CertData, u.Config().KeyData, nil
	}
	kubeconfigFor := func(user string) string {
		u, err := env.Environment.ControlPlane.AddUser(envtest.User{Name: user}, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := u.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(c.scratch, user+".kubeconfig")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rootCA := filepath.Join(c.scratch, "root-ca.crt")
	if err := os.WriteFile(rootCA, api.SecureServing.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	// The controller manager creates the default ServiceAccount and the kube-root-ca.crt
	// ConfigMap a token volume needs; the scheduler places the pods.
	kcm := kubeconfigFor("system:kube-controller-manager")
	c.stopAll = append(c.stopAll, startProcess(t, c.scratch, "kube-controller-manager", filepath.Join(c.k8sDir, "kube-controller-manager"),
		"--kubeconfig="+kcm, "--authentication-kubeconfig="+kcm, "--authorization-kubeconfig="+kcm,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
		"--controllers=*,-nodeipam", "--use-service-account-credentials=true",
		"--root-ca-file="+rootCA, "--service-account-private-key-file="+filepath.Join(api.CertDir, "sa-signer.key")))
	sched := kubeconfigFor("system:kube-scheduler")
	c.stopAll = append(c.stopAll, startProcess(t, c.scratch, "kube-scheduler", filepath.Join(c.binDir, "kube-scheduler"),
		"--kubeconfig="+sched, "--authentication-kubeconfig="+sched, "--authorization-kubeconfig="+sched,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false"))

	pauseTar, err := node.BuildPauseImage(c.root, c.scratch)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := n.Start(ctx, node.Control{Server: env.Config.Host, CA: api.SecureServing.CA, KubeletClientCA: pemCert(kcaCert), Issue: issueFn}, pauseTar); err != nil {
		t.Fatal(err)
	}
	c.cs = kubernetes.NewForConfigOrDie(env.Config)
	c.poll("node Ready", 2*time.Minute, func() (bool, error) {
		nd, err := c.cs.CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range nd.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, fmt.Errorf("%s: %s", cond.Reason, cond.Message)
			}
		}
		return false, nil
	})
	t.Logf("node %s Ready %s after Start", n.Name(), time.Since(start).Round(time.Second))
	return c
}

func (c *realCluster) poll(what string, timeout time.Duration, cond func() (bool, error)) {
	c.t.Helper()
	poll(c.ctx, c.t, c.node, what, timeout, cond)
}

// helloImage builds the hello test image, imports it on the node as localhost/hello:local and
// returns the binary, which also runs on the host or in the node's netns as a client.
func (c *realCluster) helloImage() string {
	c.t.Helper()
	bin := filepath.Join(c.scratch, "hello")
	if err := node.BuildStatic(c.root, "./test/node/images/hello", bin); err != nil {
		c.t.Fatal(err)
	}
	tarPath := filepath.Join(c.scratch, "hello.tar")
	if err := node.WriteImage(tarPath, node.ImageSpec{Ref: "localhost/hello:local", Binary: bin, UID: 65532}); err != nil {
		c.t.Fatal(err)
	}
	if err := c.node.ImportImage(tarPath); err != nil {
		c.t.Fatal(err)
	}
	return bin
}

// waitPodReady waits for the pod's Ready condition and returns the pod.
func (c *realCluster) waitPodReady(ns, name string, timeout time.Duration) *corev1.Pod {
	c.t.Helper()
	var pod *corev1.Pod
	c.poll("pod "+name+" Ready", timeout, func() (bool, error) {
		p, err := c.cs.CoreV1().Pods(ns).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				return cond.Status == corev1.ConditionTrue, fmt.Errorf("phase %s, %s: %s", p.Status.Phase, cond.Reason, cond.Message)
			}
		}
		return false, fmt.Errorf("phase %s", p.Status.Phase)
	})
	return pod
}

// stop tears down the node first, while its API server still answers, then the control
// plane, and checks that nothing is left: no link, netns, cgroup, mount or process.
// stopInOrder stops the node's processes, then the control plane, leaving the node's network
// to node.Stop: the API server's shutdown waits for its clients' watches to end, and for its
// requests to itself on the host end of the node's veth.
func (c *realCluster) stopInOrder() {
	if err := c.node.StopProcesses(); err != nil {
		c.t.Errorf("stopping the node's processes: %v", err)
	}
	for i := len(c.stopAll) - 1; i >= 0; i-- {
		c.stopAll[i]()
	}
}

func (c *realCluster) stop() {
	t, n := c.t, c.node
	t.Helper()
	c.stopped = true
	stopStart := time.Now()
	c.stopInOrder()
	if err := n.Stop(); err != nil {
		t.Errorf("stopping the node: %v", err)
	}
	t.Logf("node stopped in %s", time.Since(stopStart).Round(100*time.Millisecond))
	if left := n.Leftovers(); len(left) > 0 {
		t.Errorf("the node left behind:\n%s", strings.Join(left, "\n"))
	}
	// This cluster's processes: their command lines name its folders (another cluster of the
	// same test may still run).
	cp := c.env.Environment.ControlPlane
	marks := []string{c.scratch, filepath.Dir(filepath.Dir(n.ContainerdSocket())), cp.APIServer.CertDir, cp.Etcd.DataDir}
	for _, dir := range []string{c.binDir, c.k8sDir} {
		if pids := runningFrom(dir, marks...); len(pids) > 0 {
			t.Errorf("processes still running from %s: %v", dir, pids)
		}
	}
	if _, err := os.Stat(n.Netns()); !os.IsNotExist(err) {
		t.Errorf("netns file %s still there: %v", n.Netns(), err)
	}
}
