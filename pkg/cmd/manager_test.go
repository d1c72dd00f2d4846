package cmd

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// get sends a GET with an optional bearer token; the metrics endpoint's certificate is
// self-signed, so it is not verified.
func get(url, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitForStatus polls url until it answers with want (a connection error or another status
// is retried until timeout) and returns the body.
func waitForStatus(t *testing.T, url, token string, want int, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		code, body, err := get(url, token)
		if err == nil && code == want {
			return body
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s did not answer %d within %s; last: %s", url, want, timeout, last)
	return ""
}

func waitForHTTP(t *testing.T, url string, timeout time.Duration) string {
	t.Helper()
	return waitForStatus(t, url, "", http.StatusOK, timeout)
}

// serviceAccountToken creates a ServiceAccount and returns a token for it from the
// TokenRequest API, as the kubelet mounts one for Prometheus's pod.
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// grantMetricsReader binds the ServiceAccount to a ClusterRole with the one rule the chart's
// metrics-reader ClusterRole grants.
func grantMetricsReader(t *testing.T, cs kubernetes.Interface, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startManager runs the manager command with args and returns a function that stops it and
// fails the test if it does not exit cleanly.
func startManager(t *testing.T, args ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root := NewRootCommand()
	root.SetArgs(append([]string{"manager"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("manager exited with an error: %v", err)
			}
		case <-time.After(45 * time.Second):
			t.Fatal("manager did not stop within 45s of cancellation")
		}
	}
	t.Cleanup(stop)
	return stop
}

func TestManagerServesHealthAndMetricsAndStopsCleanly(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{})
	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	metricsAddr, probeAddr, pprofAddr := freeAddr(t), freeAddr(t), freeAddr(t)

	stop := startManager(t,
		"--kubeconfig", kubeconfig,
		"--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", probeAddr,
		"--pprof-bind-address", pprofAddr,
		"--leader-elect", "--leader-election-namespace", "default",
		"--gitopscluster-concurrency", "2", "--signer-concurrency", "3",
		"--zap-log-level", "info",
	)

	waitForHTTP(t, "http://"+probeAddr+"/healthz", 60*time.Second)
	waitForHTTP(t, "http://"+probeAddr+"/readyz", 60*time.Second)

	// Metrics are HTTPS and need a token the API server authenticates...
	metricsURL := "https://" + metricsAddr + "/metrics"
	waitForStatus(t, metricsURL, "", http.StatusUnauthorized, 60*time.Second)
	if code, _, err := get("http://"+metricsAddr+"/metrics", ""); err == nil && code == http.StatusOK {
		t.Error("metrics answer plain HTTP")
	}
	// A token the API server does not accept is refused too (controller-runtime's filter
	// answers 500 when the TokenReview reports an error, as it does for a malformed token).
	if code, _, err := get(metricsURL, "not-a-token"); err != nil || code < 400 {
		t.Errorf("an invalid token: want a refusal, got %d %v", code, err)
	}
	// ...and authorizes for get on /metrics: a valid token without that right is refused.
	stranger := serviceAccountToken(t, cs, "default", "stranger")
	if code, body, err := get(metricsURL, stranger); err != nil || code != http.StatusForbidden {
		t.Errorf("a ServiceAccount without get /metrics: want 403, got %d %s %v", code, body, err)
	}
	scraper := serviceAccountToken(t, cs, "default", "prometheus")
	grantMetricsReader(t, cs, "default", "prometheus")
	metrics := waitForStatus(t, metricsURL, scraper, http.StatusOK, 30*time.Second)
	for _, want := range []string{"controller_runtime_", "leader_election_master_status"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// HTTP/1.1 only, unless --enable-http2.
	conn, err := tls.Dial("tcp", metricsAddr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("metrics endpoint negotiated %q, want http/1.1", p)
	}
	_ = conn.Close()
	// The concurrency flags reach the controllers: their worker counts appear once they
	// start, which is after this replica wins the election.
	for deadline := time.Now().Add(60 * time.Second); ; {
		missing := []string{}
		for _, want := range []string{`controller_runtime_max_concurrent_reconciles{controller="gitopscluster"} 2`, `controller_runtime_max_concurrent_reconciles{controller="csr-signer"} 3`} {
			if !strings.Contains(metrics, want) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %v", missing)
		}
		time.Sleep(500 * time.Millisecond)
		metrics = waitForStatus(t, metricsURL, scraper, http.StatusOK, 10*time.Second)
	}

	// pprof answers on its loopback address.
	if index := waitForHTTP(t, "http://"+pprofAddr+"/debug/pprof/", 10*time.Second); !strings.Contains(index, "goroutine") {
		t.Errorf("pprof index lacks the goroutine profile: %.200s", index)
	}

	stop()
	if _, err := http.Get("http://" + probeAddr + "/healthz"); err == nil {
		t.Error("health endpoint still answers after shutdown")
	}
	if _, err := http.Get("http://" + pprofAddr + "/debug/pprof/"); err == nil {
		t.Error("pprof still answers after shutdown")
	}

	// --metrics-secure=false: plain HTTP for anyone, as before. Controller names are unique
	// per process, so this manager runs in a child process.
	plainAddr := freeAddr(t)
	child := exec.Command(os.Args[0], "-test.run=^TestManagerChildProcess$")
	child.Env = append(append(os.Environ(), testenv.ProjectProcessEnv()...), childArgsEnv+"="+strings.Join([]string{
		"--kubeconfig", kubeconfig,
		"--metrics-bind-address", plainAddr, "--metrics-secure=false",
		"--health-probe-bind-address", "0",
	}, "\n"))
	child.Stdout, child.Stderr = io.Discard, io.Discard
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	}()
	if m := waitForHTTP(t, "http://"+plainAddr+"/metrics", 60*time.Second); !strings.Contains(m, "controller_runtime_") {
		t.Error("plain metrics lack controller_runtime_")
	}
}

// childArgsEnv carries the manager arguments to TestManagerChildProcess, one a line.
const childArgsEnv = "ARGOCD_AGENT_ADDON_TEST_MANAGER_ARGS"

// TestManagerChildProcess runs the manager command when started by another test as a child
// process, and does nothing otherwise.
func TestManagerChildProcess(t *testing.T) {
	args := os.Getenv(childArgsEnv)
	if args == "" {
		t.Skip("runs only as a child process of another test")
	}
	root := NewRootCommand()
	root.SetArgs(append([]string{"manager"}, strings.Split(args, "\n")...))
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestManagerRefusesNonLoopbackPprof(t *testing.T) {
	for _, addr := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "10.0.0.1:6060"} {
		root := NewRootCommand()
		// The kubeconfig does not exist: the address must be refused before it is read.
		root.SetArgs([]string{"manager", "--kubeconfig", "/does/not/exist", "--pprof-bind-address", addr})
		err := root.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
			t.Errorf("--pprof-bind-address %s: want a loopback error, got %v", addr, err)
		}
	}
}

func TestManagerRefusesBadConcurrencyAndLeaderTimings(t *testing.T) {
	for _, args := range [][]string{
		{"--signer-concurrency", "0"},
		{"--gitopscluster-concurrency", "-1"},
		{"--pull-model-concurrency", "0"},
		{"--leader-elect-lease-duration", "5s"},
	} {
		root := NewRootCommand()
		root.SetArgs(append([]string{"manager", "--kubeconfig", "/does/not/exist"}, args...))
		err := root.ExecuteContext(context.Background())
		if err == nil || strings.Contains(err.Error(), "/does/not/exist") {
			t.Errorf("%v: want a flag error, got %v", args, err)
		}
	}
}

func TestManagerRejectsUnreadableKubeconfig(t *testing.T) {
	root := NewRootCommand()
	root.SetArgs([]string{"manager", "--kubeconfig", "/does/not/exist", "--metrics-bind-address", "0"})
	err := root.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "/does/not/exist") {
		t.Fatalf("want an error naming the kubeconfig, got %v", err)
	}
}

func TestVersionCommand(t *testing.T) {
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "argocd-agent-addon v") {
		t.Errorf("version output %q", out.String())
	}
}
