package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatusSaysHowToReachAHub: with no kubeconfig anywhere and no cluster around it, status
// names the flags that point it at a hub instead of client-go's bare "no configuration".
func TestStatusSaysHowToReachAHub(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	root := NewRootCommand()
	root.SetArgs([]string{"status"})
	err := root.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig") || !strings.Contains(err.Error(), "--context") {
		t.Fatalf("want advice naming --kubeconfig and --context, got %v", err)
	}
}

// TestStatusContextPicksTheHub: --context chooses the kubeconfig's hub, not its current
// context.
func TestStatusContextPicksTheHub(t *testing.T) {
	hub, accepted := countingListener(t)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters:
- {name: spoke, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}
- {name: hub, cluster: {server: "https://` + hub + `", insecure-skip-tls-verify: true}}
users: [{name: u, user: {token: t}}]
contexts:
- {name: spoke, context: {cluster: spoke, user: u}}
- {name: hub, context: {cluster: hub, user: u}}
current-context: spoke
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	root := NewRootCommand()
	root.SetArgs([]string{"status", "--kubeconfig", path, "--context", "hub"})
	_ = root.ExecuteContext(context.Background())
	if accepted.Load() == 0 {
		t.Error("status --context hub did not reach the hub's server")
	}
	root = NewRootCommand()
	root.SetArgs([]string{"status", "--kubeconfig", path, "--context", "nowhere"})
	if err := root.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("an unknown context: %v", err)
	}
}
