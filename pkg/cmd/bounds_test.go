package cmd

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener stands in for an API server: it accepts and drops connections, counting
// them, so a test can tell whether the manager tried to connect.
func countingListener(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	return l.Addr().String(), accepted
}

func kubeconfigFor(t *testing.T, addr string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: "https://` + addr + `", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: hub, context: {cluster: hub, user: u}}]
current-context: hub
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestManagerRefusesEveryBoundedFlagOutOfRangeBeforeConnecting walks each bounded flag just
// outside its range: the manager refuses it, naming the flag, and never opens a connection to
// the API server its kubeconfig names. With every flag in range it does connect, so the count
// would have seen an attempt.
func TestManagerRefusesEveryBoundedFlagOutOfRangeBeforeConnecting(t *testing.T) {
	addr, accepted := countingListener(t)
	kubeconfig := kubeconfigFor(t, addr)
	manager := newManagerCommand()
	bounds := ManagerFlagBounds()
	if len(bounds) == 0 {
		t.Fatal("no bounded flags")
	}
	for name, b := range bounds {
		f := manager.Flags().Lookup(name)
		if f == nil {
			t.Errorf("bound for --%s, which the manager does not have", name)
			continue
		}
		if err := checkBound(f.Value.Type(), f.DefValue, b); err != nil {
			t.Errorf("--%s: its own default is out of range: %v", name, err)
		}
		for _, v := range b.Outside(f.Value.Type()) {
			root := NewRootCommand()
			root.SetArgs([]string{"manager", "--kubeconfig", kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0", "--" + name + "=" + v})
			err := root.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), "--"+name) {
				t.Errorf("--%s=%s: want a refusal naming the flag, got %v", name, v, err)
			}
			if n := accepted.Load(); n != 0 {
				t.Fatalf("--%s=%s: the manager connected to the API server (%d connections) before refusing", name, v, n)
			}
		}
	}
	// Every other duration flag refuses a negative value the same way.
	for _, name := range []string{"max-csr-age", "departure-settle", "graceful-shutdown-timeout", "pull-model-offline-release-after", "ca-validity"} {
		root := NewRootCommand()
		root.SetArgs([]string{"manager", "--kubeconfig", kubeconfig, "--" + name + "=-1s"})
		if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "--"+name) {
			t.Errorf("--%s=-1s: want a refusal naming the flag, got %v", name, err)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the manager connected before refusing a negative duration (%d connections)", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := NewRootCommand()
	root.SetArgs([]string{"manager", "--kubeconfig", kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-elect=false"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	for accepted.Load() == 0 {
		select {
		case err := <-done:
			if accepted.Load() == 0 {
				t.Fatalf("with every flag in range the manager stopped without connecting: %v", err)
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	<-done
}

func TestCheckBound(t *testing.T) {
	for _, tc := range []struct {
		typ, value string
		b          Bound
		ok         bool
	}{
		{"duration", "1h", Bound{Min: "1h"}, true},
		{"duration", "59m59s", Bound{Min: "1h"}, false},
		{"duration", "720h", Bound{Min: "1h", Max: "720h"}, true},
		{"duration", "720h1s", Bound{Min: "1h", Max: "720h"}, false},
		{"duration", "0s", Bound{Min: "0s", MinExclusive: true}, false},
		{"float32", "0.5", Bound{Min: "0", MinExclusive: true}, true},
		{"int", "101", Bound{Min: "0", Max: "100"}, false},
	} {
		if err := checkBound(tc.typ, tc.value, tc.b); (err == nil) != tc.ok {
			t.Errorf("%s %s in %+v: %v", tc.typ, tc.value, tc.b, err)
		}
	}
}
