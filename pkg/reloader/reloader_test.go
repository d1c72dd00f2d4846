package reloader

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestDirHashChangesWithContentOnly(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tls.crt", "cert-1")
	write("tls.key", "key-1")
	a, _ := DirHash(dir)
	b, _ := DirHash(dir)
	if a != b {
		t.Fatal("hash is not stable")
	}
	write("tls.crt", "cert-2")
	c, _ := DirHash(dir)
	if c == a {
		t.Fatal("a new certificate did not change the hash")
	}
}

// TestRunRestartsTheNamedProcessWhenTheCertificateChanges starts a real process under a unique
// name, changes the watched certificate, and expects that process, and only it, to get SIGTERM.
func TestRunRestartsTheNamedProcessWhenTheCertificateChanges(t *testing.T) {
	sleepPath, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	bin := t.TempDir()
	name := fmt.Sprintf("fake-agent-%d", time.Now().UnixNano())
	copyFile(t, sleepPath, filepath.Join(bin, name))
	agent := exec.Command(filepath.Join(bin, name), "300")
	bystander := exec.Command(sleepPath, "300")
	for _, c := range []*exec.Cmd{agent, bystander} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _ = bystander.Process.Kill(); _ = agent.Process.Kill() }()

	certs := t.TempDir()
	if err := os.WriteFile(filepath.Join(certs, "tls.crt"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, logr.Discard(), Options{WatchDir: certs, ProcessName: name, Interval: 50 * time.Millisecond})
	}()

	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	select {
	case <-exited:
		t.Fatal("the agent was signalled before its certificate changed")
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.WriteFile(filepath.Join(certs, "tls.crt"), []byte("renewed"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err == nil {
			t.Fatal("the agent exited normally, not by a signal")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was not restarted after its certificate changed")
	}
	// The bystander is our child: a signal would have ended it, and Wait4 with WNOHANG reports
	// an ended child without blocking.
	var ws syscall.WaitStatus
	if pid, err := syscall.Wait4(bystander.Process.Pid, &ws, syscall.WNOHANG, nil); err != nil || pid != 0 {
		t.Fatalf("a process with another name was signalled (wait4: pid %d, %v, status %v)", pid, err, ws)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRunNeedsItsOptions(t *testing.T) {
	if err := Run(context.Background(), logr.Discard(), Options{}); err == nil {
		t.Fatal("want an error without options")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
