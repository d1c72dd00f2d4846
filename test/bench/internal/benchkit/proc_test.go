package benchkit

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

	command, fields, ok := ProcStat(pid)
	if !ok || command != name {
		t.Fatalf("command %q (read %v), want %q", command, ok, name)
	}
	if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
		t.Errorf("fields after the command %v, want the parent %d second", fields, os.Getpid())
	}
	if !Running(pid) {
		t.Error("a sleeping process reads as not running")
	}
	if kids, err := ChildrenNamed(name); err != nil || len(kids) != 1 || kids[0] != pid {
		t.Errorf("children named %q: %v (%v), want [%d]", name, kids, err, pid)
	}

	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if Running(pid) {
		t.Error("an exited process reads as running")
	}
}

// TestProcessCPUOfAKnownWorkload reads the CPU time of a process that burns some, once it has
// exited and before it is reaped, and finds what the kernel reports to its parent.
func TestProcessCPUOfAKnownWorkload(t *testing.T) {
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if err := cmd.Start(); err != nil {
		t.Skip("no sh here")
	}
	pid := cmd.Process.Pid
	for Running(pid) {
		time.Sleep(5 * time.Millisecond)
	}
	read := ProcessCPU(pid) // the zombie keeps its times until reaped
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	want := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if want < 50*time.Millisecond {
		t.Fatalf("the workload used only %s; the test needs one that uses more than the clock's tick", want)
	}
	// /proc counts in ticks of 10 ms, the kernel's rusage in microseconds.
	if d := read - want; d < -20*time.Millisecond || d > 20*time.Millisecond {
		t.Errorf("ProcessCPU read %s, the kernel reported %s", read, want)
	}
}
