package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestProcStat reads a command name with a space and a parenthesis in it, and the fields
// after it, from a process this test starts.
func TestProcStat(t *testing.T) {
	// The kernel names a process after its executable's file name (at most 15 bytes).
	name := "a (b) c"
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command here")
	}
	link := filepath.Join(t.TempDir(), name)
	if err := os.Symlink(sleep, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	command, fields, ok := procStat(pid)
	if !ok || command != name {
		t.Fatalf("command %q (read %v), want %q", command, ok, name)
	}
	if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
		t.Errorf("fields after the command %v, want the parent %d second", fields, os.Getpid())
	}
	if !running(pid) {
		t.Error("a sleeping process reads as not running")
	}
	if kids, err := childrenNamed(name); err != nil || len(kids) != 1 || kids[0] != pid {
		t.Errorf("children named %q: %v (%v), want [%d]", name, kids, err, pid)
	}

	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if running(pid) {
		t.Error("an exited process reads as running")
	}
}

func TestCPUShare(t *testing.T) {
	c := cpuShare{servers: 3 * time.Second, client: time.Second, took: 4 * time.Second}
	if got := c.busy(); got != 1 {
		t.Errorf("4 s of CPU in 4 s keeps %.2f cores busy, want 1", got)
	}
	if got := c.floor(2); got != 2*time.Second {
		t.Errorf("4 s of CPU on 2 cores takes at least %s, want 2s", got)
	}
}
