package cmd

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

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

func waitForHTTP(t *testing.T, url string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(body)
			}
			last = resp.Status + " " + string(body)
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within %s; last: %s", url, timeout, last)
	return ""
}

func TestManagerServesHealthAndMetricsAndStopsCleanly(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{})
	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := NewRootCommand()
	root.SetArgs([]string{"manager",
		"--kubeconfig", kubeconfig,
		"--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", probeAddr,
		"--leader-elect", "--leader-election-namespace", "default",
		"--zap-log-level", "info",
	})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	waitForHTTP(t, "http://"+probeAddr+"/healthz", 60*time.Second)
	waitForHTTP(t, "http://"+probeAddr+"/readyz", 60*time.Second)
	metrics := waitForHTTP(t, "http://"+metricsAddr+"/metrics", 60*time.Second)
	for _, want := range []string{"controller_runtime_", "leader_election_master_status"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("manager exited with an error: %v", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("manager did not stop within 45s of cancellation")
	}
	if _, err := http.Get("http://" + probeAddr + "/healthz"); err == nil {
		t.Error("health endpoint still answers after shutdown")
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
