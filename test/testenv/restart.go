package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// RestartAPIServer stops kube-apiserver (etcd keeps running), waits down, and starts it again
// on the same address with the same serving certificates, so clients made before keep working
// once it is back, as after a real restart.
func (e *Env) RestartAPIServer(down time.Duration) error {
	as := e.Environment.ControlPlane.APIServer
	keep, err := os.MkdirTemp("", "apiserver-certs-")
	if err != nil {
		return err
	}
	e.keptCertDirs = append(e.keptCertDirs, keep)
	// envtest removes a certificate folder it allocated itself when the server stops.
	if err := os.CopyFS(keep, os.DirFS(as.CertDir)); err != nil {
		return err
	}
	// envtest sends SIGTERM and, when the server takes longer than its stop timeout to drain
	// its connections, SIGKILL: either way it is down afterwards, as after a crash.
	if err := as.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
		return fmt.Errorf("stopping kube-apiserver: %w", err)
	}
	as.CertDir = keep
	as.StopTimeout = 5 * time.Second
	// A loaded machine (make test runs three packages at once) can take longer than envtest's
	// default 20 s to bring back an API server over a populated etcd.
	as.StartTimeout = max(as.StartTimeout, time.Minute)
	time.Sleep(down)
	if err := as.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	return nil
}

// BuildManager builds the project's binary into dir and returns its path.
func BuildManager(dir string) (string, error) {
	bin := filepath.Join(dir, "argocd-agent-addon")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/argocd-agent-addon")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}
