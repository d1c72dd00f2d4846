package testenv

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
)

// TestAPIServerReportsItsVersion guards the version ldflags of hack/test-binaries.sh: clients
// parse the server's version, and an unset one ("v0.0.0-master") breaks them.
func TestAPIServerReportsItsVersion(t *testing.T) {
	env := StartForTest(t, Options{WithoutOCM: true})
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.GitVersion, "v1.36.") || v.Major != "1" || v.Minor != "36" {
		t.Errorf("server version = %+v, want v1.36.x", v)
	}
}

// TestStopAfterRestartLeavesNothing: a restarted API server is stopped with the env, and the
// serving certificates the restart kept are removed with it; a test suite that restarts the
// API server leaves no process or folder behind on the CI machine.
func TestStopAfterRestartLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver; skipped with -short")
	}
	env, err := Start(Options{WithoutOCM: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.RestartAPIServer(0); err != nil {
		_ = env.Stop()
		t.Fatal(err)
	}
	kept := slices.Clone(env.keptCertDirs)
	if len(kept) != 1 {
		t.Errorf("kept certificate folders = %v, want one", kept)
	}
	addr := strings.TrimPrefix(strings.TrimSuffix(env.Config.Host, "/"), "https://")
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range kept {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left after Stop (stat: %v)", dir, err)
		}
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = conn.Close()
		t.Errorf("the restarted API server still listens on %s after Stop", addr)
	}
}
