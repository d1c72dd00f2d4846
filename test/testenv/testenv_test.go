package testenv

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

// TestStopAfterRestartStopsTheServer: a restarted API server is stopped with the env, and the
// serving certificates the restart kept are removed with it; a suite that restarts the API
// server leaves neither behind on the CI machine.
func TestStopAfterRestartStopsTheServer(t *testing.T) {
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
	if len(kept) > 0 && len(processesWith("--cert-dir="+kept[0])) != 1 {
		t.Errorf("no API server runs with the kept certificates %s after the restart", kept[0])
	}
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range kept {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left after Stop (stat: %v)", dir, err)
		}
		if pids := processesWith("--cert-dir=" + dir); len(pids) > 0 {
			t.Errorf("the restarted API server still runs after Stop: pids %v", pids)
		}
	}
}

// processesWith returns the pids of the processes one of whose arguments is arg.
func processesWith(arg string) []string {
	var pids []string
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(b), "\x00"), arg) {
			pids = append(pids, filepath.Base(filepath.Dir(f)))
		}
	}
	return pids
}

// TestProjectProcessesKeepTheirOwnGOGC: make test runs its processes at a GOGC of its own; a
// process of the project's binary started with ProjectProcessEnv after the test's environment
// (as pkg/cmd's and test/fault's are) sees none, so the manager applies its own default.
func TestProjectProcessesKeepTheirOwnGOGC(t *testing.T) {
	t.Setenv("GOGC", "400")
	cmd := exec.Command("sh", "-c", `printf '[%s]' "$GOGC"`)
	cmd.Env = append(os.Environ(), ProjectProcessEnv()...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "[]" {
		t.Errorf("GOGC in a project process: %s, want it empty", out)
	}
}
