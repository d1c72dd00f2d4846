package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// reportManagerErrors prints how many errors the manager logged (lines below error level, from
// a lower --manager-log-level, are skipped) and the first of them, so a slow phase can be told
// from a failing one.
func reportManagerErrors(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if managerLog != "" {
		if err := os.WriteFile(managerLog, b, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "keep the manager's log: %v\n", err)
		}
	}
	// Distinct errors, by controller and message: a conflict retried is not a failure, but it
	// shows as one here, and a reader must see which it was.
	seen := map[string]int{}
	var order []string
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct{ Level, Controller, Msg, Error string }
		if l == "" {
			continue
		}
		if json.Unmarshal([]byte(l), &e) != nil {
			e.Msg = l
		} else if e.Level == "info" || e.Level == "debug" || e.Level == "warn" || strings.HasPrefix(e.Level, "Level(") {
			continue // a lower --manager-log-level's lines
		}
		lines = append(lines, l)
		k := strings.TrimSpace(e.Controller + " " + e.Msg + ": " + e.Error)
		if len(k) > 240 {
			k = k[:240]
		}
		if seen[k] == 0 {
			order = append(order, k)
		}
		seen[k]++
	}
	fmt.Printf("         manager errors: %d log lines\n", len(lines))
	for _, k := range order[:min(len(order), 3)] {
		fmt.Printf("           %dx %s\n", seen[k], k)
	}
}

// registration writes one.
const probeResource = "manifestworks"

// releaseNamespace is where the benchmark installs the chart.
const releaseNamespace = "argocd-agent-addon"

// managerCommand returns the manager's arguments. As the chart runs it: with the chart's
// arguments, authenticated as its ServiceAccount with the RBAC the chart grants (Secrets,
// Deployments, Services and ConfigMaps only in the managed namespace), without leader
// election (a standby's lease renewals are not the manager's writes). With --admin, as
// system:masters with the binary's defaults.
func managerCommand(ctx context.Context, env *testenv.Env, dir, healthAddr string) ([]string, error) {
	common := []string{"--metrics-bind-address=0", "--health-probe-bind-address=" + healthAddr, "--zap-log-level=" + managerLogLevel, "--leader-elect=false"}
	if asAdmin {
		kubeconfig, err := env.KubeconfigFile(dir)
		if err != nil {
			return nil, err
		}
		args := append([]string{"manager", "--kubeconfig=" + kubeconfig, "--managed-namespaces=" + namespace}, common...)
		return append(args, *managerArgs...), nil
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}); err != nil {
		return nil, err
	}
	install, err := testenv.InstallChart(ctx, env.Client, releaseNamespace, map[string]any{"managedNamespaces": []any{namespace}})
	if err != nil {
		return nil, err
	}
	sa := testenv.ServiceAccount(releaseNamespace, install.ServiceAccount)
	kubeconfig, err := env.UserKubeconfigFile(dir, "manager-kubeconfig", sa.User, sa.Groups...)
	if err != nil {
		return nil, err
	}
	return install.Args(append(append(common, "--kubeconfig="+kubeconfig), *managerArgs...)...), nil
}

// waitForQuiet waits until the API server has taken no write for 5 seconds (at most 10 minutes),
// comparing first with the counts from, and returns its write counts then and when the last
// write was seen.
func waitForQuiet(ctx context.Context, env *testenv.Env, from map[string]int, after string) (map[string]int, time.Time, error) {
	settled, at, err := testenv.AwaitQuiet(ctx, env.Config, testenv.Quiet{For: 5 * time.Second, Limit: 10 * time.Minute, Every: time.Second, From: from})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("after %s: %w", after, err)
	}
	return settled, at, nil
}

// freeLoopbackAddress is a loopback address with a port no one listens on now.
func freeLoopbackAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// waitReady polls the manager's readiness endpoint, which answers once the informers its
// controllers registered have synced. It stops early when the manager exits.
func waitReady(ctx context.Context, addr string, pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	httpClient := &http.Client{Timeout: 5 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := httpClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !benchkit.Running(pid) {
			return fmt.Errorf("the manager exited before it was ready (its log is reported below)")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager was not ready %s after its start", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
