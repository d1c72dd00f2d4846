package node_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestPodOnRealNode runs a pod from a locally built image on a real node joined to an
// envtest API server, with the controller manager and scheduler real clusters have, then
// stops everything and checks that the node left nothing behind.
func TestPodOnRealNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node; skipped with -short")
	}
	// Opt-in: it changes the machine (cgroups, network namespaces, mounts) while it runs.
	if os.Getenv("FLEET_REAL_NODES") != "1" {
		t.Skip("real-node test: set FLEET_REAL_NODES=1 (make test-node) to run it, as root with hack/node-packages.sh's packages")
	}
	if err := node.Available(); err != nil {
		// Asked for and impossible: a skip would report a pass that tested nothing.
		t.Fatalf("FLEET_REAL_NODES=1 but real nodes cannot run here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := testenv.RepoRoot()
	binDir := nodeBinaries(t, root)
	k8sDir, err := testenv.BinaryAssets()
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	nodeDir, err := os.MkdirTemp("", "node-test-")
	if err != nil {
		t.Fatal(err)
	}

	index := freeIndex(t)
	n, err := node.Prepare(node.Options{Name: "node-test", Index: index, Dir: nodeDir, BinDir: binDir, LogDir: filepath.Join(scratch, "logs")})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	var stopAll []func()
	t.Cleanup(func() {
		if !stopped {
			for i := len(stopAll) - 1; i >= 0; i-- {
				stopAll[i]()
			}
			if err := n.Stop(); err != nil {
				t.Errorf("stopping the node: %v", err)
			}
		}
		if t.Failed() {
			for _, f := range []string{"containerd", "kubelet", "kube-proxy", "kube-controller-manager", "kube-scheduler"} {
				b, _ := os.ReadFile(filepath.Join(scratch, "logs", f+".log"))
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
		if err := os.WriteFile(filepath.Join(scratch, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env, err := testenv.Start(testenv.Options{
		WithoutOCM:         true,
		WithoutProjectCRDs: true,
		APIServerAddress:   n.HostIP(),
		APIServerArgs: map[string]string{
			"authorization-mode":       "Node,RBAC",
			"enable-admission-plugins": "NodeRestriction",
			// envtest turns ServiceAccount admission off; real pods need their token volume.
			"disable-admission-plugins":       "",
			"kubelet-client-certificate":      filepath.Join(scratch, "kubelet-client.crt"),
			"kubelet-client-key":              filepath.Join(scratch, "kubelet-client.key"),
			"kubelet-preferred-address-types": "InternalIP",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stopAll = append(stopAll, func() { _ = env.Stop() })
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
		p := filepath.Join(scratch, user+".kubeconfig")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rootCA := filepath.Join(scratch, "root-ca.crt")
	if err := os.WriteFile(rootCA, api.SecureServing.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	// The controller manager creates the default ServiceAccount and the kube-root-ca.crt
	// ConfigMap a token volume needs; the scheduler places the pod.
	kcm := kubeconfigFor("system:kube-controller-manager")
	stopAll = append(stopAll, startProcess(t, scratch, "kube-controller-manager", filepath.Join(k8sDir, "kube-controller-manager"),
		"--kubeconfig="+kcm, "--authentication-kubeconfig="+kcm, "--authorization-kubeconfig="+kcm,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
		"--controllers=*,-nodeipam", "--use-service-account-credentials=true",
		"--root-ca-file="+rootCA, "--service-account-private-key-file="+filepath.Join(api.CertDir, "sa-signer.key")))
	sched := kubeconfigFor("system:kube-scheduler")
	stopAll = append(stopAll, startProcess(t, scratch, "kube-scheduler", filepath.Join(binDir, "kube-scheduler"),
		"--kubeconfig="+sched, "--authentication-kubeconfig="+sched, "--authorization-kubeconfig="+sched,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false"))

	pauseTar, err := node.BuildPauseImage(root, scratch)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := n.Start(ctx, node.Control{Server: env.Config.Host, CA: api.SecureServing.CA, KubeletClientCA: pemCert(kcaCert), Issue: issueFn}, pauseTar); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	poll(ctx, t, n, "node Ready", 2*time.Minute, func() (bool, error) {
		nd, err := cs.CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range nd.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, fmt.Errorf("%s: %s", c.Reason, c.Message)
			}
		}
		return false, nil
	})
	t.Logf("node %s Ready %s after Start", n.Name(), time.Since(start).Round(time.Second))

	helloBin := filepath.Join(scratch, "hello")
	if err := node.BuildStatic(root, "./test/node/images/hello", helloBin); err != nil {
		t.Fatal(err)
	}
	helloTar := filepath.Join(scratch, "hello.tar")
	if err := node.WriteImage(helloTar, node.ImageSpec{Ref: "localhost/hello:local", Binary: helloBin, UID: 65532}); err != nil {
		t.Fatal(err)
	}
	if err := n.ImportImage(helloTar); err != nil {
		t.Fatal(err)
	}

	ns := "default"
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		StringData: map[string]string{"token": "s3cr3t"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nonRoot := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot},
			Containers: []corev1.Container{{
				Name:            "hello",
				Image:           "localhost/hello:local",
				ImagePullPolicy: corev1.PullNever,
				Env: []corev1.EnvVar{
					{Name: "GREETING", Value: "hi-from-env"},
					{Name: "SECRET_FILE", Value: "/secret/token"},
				},
				Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "secret", MountPath: "/secret", ReadOnly: true}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 2},
			}},
			Volumes: []corev1.Volume{{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "hello"}}}},
		},
	}
	// Admission refuses the pod until the controller manager has made the default ServiceAccount.
	poll(ctx, t, n, "pod created", time.Minute, func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, err
	})
	var podIP string
	poll(ctx, t, n, "pod Ready", 3*time.Minute, func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		podIP = p.Status.PodIP
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue, fmt.Errorf("phase %s, %s: %s", p.Status.Phase, c.Reason, c.Message)
			}
		}
		return false, fmt.Errorf("phase %s", p.Status.Phase)
	})
	t.Logf("pod hello Ready on %s at %s", n.Name(), podIP)

	// The API server reaches the kubelet (logs) with its client certificate, by InternalIP.
	logs, err := cs.CoreV1().Pods(ns).GetLogs("hello", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("pod logs: %v", err)
	}
	t.Logf("pod log: %s", strings.TrimSpace(string(logs)))
	for _, want := range []string{"uid 65532", `greeting "hi-from-env"`, `secret "s3cr3t"`} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("pod log lacks %q", want)
		}
	}
	// Inside the node's network namespace the pod answers on its own address.
	out, err := n.InNetns(helloBin, "-get", "http://"+podIP+":8080/").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "greeting=hi-from-env secret=s3cr3t uid=65532") {
		t.Errorf("GET the pod from the node's netns: %v: %s", err, out)
	}
	t.Logf("GET http://%s:8080/ in the node's netns: %s", podIP, strings.TrimSpace(string(out)))

	// Teardown: the node first, while its API server still answers, then the control plane.
	stopped = true
	stopStart := time.Now()
	if err := n.Stop(); err != nil {
		t.Errorf("stopping the node: %v", err)
	}
	t.Logf("node stopped in %s", time.Since(stopStart).Round(100*time.Millisecond))
	for i := len(stopAll) - 1; i >= 0; i-- {
		stopAll[i]()
	}
	if left := n.Leftovers(); len(left) > 0 {
		t.Errorf("the node left behind:\n%s", strings.Join(left, "\n"))
	}
	for _, dir := range []string{binDir, k8sDir} {
		if pids := runningFrom(dir); len(pids) > 0 {
			t.Errorf("processes still running from %s: %v", dir, pids)
		}
	}
	if _, err := os.Stat(n.Netns()); !os.IsNotExist(err) {
		t.Errorf("netns file %s still there: %v", n.Netns(), err)
	}
}

func nodeBinaries(t *testing.T, root string) string {
	if d := os.Getenv("NODE_BINARIES_DIR"); d != "" {
		return d
	}
	cmd := exec.Command(filepath.Join(root, "hack", "node-binaries.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/node-binaries.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// freeIndex picks a node index whose links no other node uses now.
func freeIndex(t *testing.T) int {
	for i := 240; i <= 250; i++ {
		if _, err := os.Stat(fmt.Sprintf("/sys/class/net/np-h%d", i)); os.IsNotExist(err) {
			return i
		}
	}
	t.Fatal("no free node index in 240..250")
	return 0
}

func poll(ctx context.Context, t *testing.T, n *node.Node, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if nerr := n.Err(); nerr != nil {
			t.Fatalf("waiting for %s: %v", what, nerr)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// startProcess runs a control-plane process in its own group and returns its stop.
func startProcess(t *testing.T, scratch, name, bin string, args ...string) func() {
	if err := os.MkdirAll(filepath.Join(scratch, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(scratch, "logs", name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	return func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
}

// runningFrom lists the live processes of this session whose executable is in dir (other
// sessions' tests may run the same binaries).
func runningFrom(dir string) []string {
	dir, _ = filepath.EvalSymlinks(dir)
	me := session(os.Getpid())
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && strings.HasPrefix(exe, dir+"/") && session(atoi(e.Name())) == me {
			out = append(out, e.Name()+" "+exe)
		}
	}
	return out
}

// session is a process's session id, from /proc/<pid>/stat after the command name.
func session(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 4 {
		return ""
	}
	return f[3]
}

func atoi(s string) int { i, _ := strconv.Atoi(s); return i }

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubelet-client-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func issue(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, orgs ...string) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}
