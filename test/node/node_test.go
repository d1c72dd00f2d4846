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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	testpoll "github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// TestPodOnRealNode runs a pod from a locally built image on a real node joined to an
// envtest API server, with the controller manager and scheduler real clusters have, then
// stops everything and checks that the node left nothing behind.
func TestPodOnRealNode(t *testing.T) {
	requireRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := startRealCluster(ctx, t, "node-test", 240, 250)
	cs, n := c.cs, c.node
	helloBin := c.helloImage()

	ns := "default"
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		StringData: map[string]string{"token": "s3cr3t"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := helloPod("hello", "hi-from-env")
	// Admission refuses the pod until the controller manager has made the default ServiceAccount.
	c.poll("pod created", time.Minute, func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, err
	})
	podIP := c.waitPodReady(ns, "hello", 3*time.Minute).Status.PodIP
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

	c.stop()
}

// helloPod runs the hello image as a server that shows greeting and the Secret "hello", Ready
// once the Secret's volume is mounted.
func helloPod(name, greeting string) *corev1.Pod {
	nonRoot := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot},
			Containers: []corev1.Container{{
				Name:            "hello",
				Image:           "localhost/hello:local",
				ImagePullPolicy: corev1.PullNever,
				Env: []corev1.EnvVar{
					{Name: "GREETING", Value: greeting},
					{Name: "SECRET_FILE", Value: "/secret/token"},
				},
				Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "secret", MountPath: "/secret", ReadOnly: true}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 2},
			}},
			Volumes: []corev1.Volume{{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "hello"}}}},
		},
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

// freeIndex picks a node index in [lo, hi] whose links no other node uses now. Each test has
// its own range, so that tests running side by side do not race for one index.
func freeIndex(t *testing.T, lo, hi int) int {
	for i := lo; i <= hi; i++ {
		if _, err := os.Stat(fmt.Sprintf("/sys/class/net/np-h%d", i)); os.IsNotExist(err) {
			return i
		}
	}
	t.Fatalf("no free node index in %d..%d", lo, hi)
	return 0
}

func poll(ctx context.Context, t *testing.T, n *node.Node, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	if err := (testpoll.Waiter{Every: 500 * time.Millisecond, Guard: n.Err}).Wait(ctx, timeout, testpoll.State(cond)); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
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

// runningFrom lists the live processes started by this test binary, directly or below, whose
// executable is in dir. Other test packages of the same make test run the same binaries at the
// same time, so the session alone does not tell whose a process is; a process that outlived its
// parent is the leftovers check's (hack/leftovers.sh), after the suite.
// With marks, only a process whose command line contains one of them counts.
func runningFrom(dir string, marks ...string) []string {
	dir, _ = filepath.EvalSymlinks(dir)
	me := os.Getpid()
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !strings.HasPrefix(exe, dir+"/") || !descendsFrom(atoi(e.Name()), me) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if len(marks) == 0 || slices.ContainsFunc(marks, func(m string) bool { return m != "" && strings.Contains(string(cmdline), m) }) {
			out = append(out, e.Name()+" "+exe)
		}
	}
	return out
}

// descendsFrom reports whether pid's chain of parents reaches ancestor.
func descendsFrom(pid, ancestor int) bool {
	for i := 0; pid > 1 && i < 64; i++ {
		if pid == ancestor {
			return true
		}
		pid = parentOf(pid)
	}
	return false
}

// parentOf is a process's parent pid, from /proc/<pid>/stat after the command name.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	return atoi(f[1])
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
