package node

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one of the node's processes, in its own process group, its output in one log file.
type proc struct {
	name, logPath string
	cmd           *exec.Cmd
	done          chan struct{}
	err           error
	stopping      bool
}

// startInNetns starts bin in the node's network namespace with nsenter, which execs it: the
// pid is the binary's.
func (n *Node) startInNetns(name, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(n.logDir, name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := n.InNetns(bin, args...)
	fmt.Fprintf(log, "# %s\n", strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = n.dir
	// Killed if the test binary dies, so a crashed run leaves no kubelet behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	return p, nil
}

// exited returns an error when the process has ended without being stopped.
func (p *proc) exited() error {
	select {
	case <-p.done:
		if p.stopping {
			return nil
		}
		return fmt.Errorf("%s (pid %d) exited: %v; last log lines:\n%s", p.name, p.cmd.Process.Pid, p.err, Tail(p.logPath, 30))
	default:
		return nil
	}
}

// stop stops the process's group (StopGroup).
func (p *proc) stop(grace time.Duration) error {
	p.stopping = true
	return StopGroup(p.name, p.cmd.Process.Pid, p.done, grace)
}

// StopGroup stops process group pgid, whose leader closes done when it has exited: SIGTERM
// (and SIGCONT, since a paused group handles it only once it runs again), SIGKILL after grace,
// then SIGKILL to the group again for children that left the leader behind, and it waits until
// no live member is left, so that nothing a test started outlives its Stop.
func StopGroup(name string, pgid int, done <-chan struct{}, grace time.Duration) error {
	select {
	case <-done:
	default:
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		_ = syscall.Kill(-pgid, syscall.SIGCONT)
	}
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s (pid %d) did not die after SIGKILL", name, pgid)
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for GroupHasLiveMembers(pgid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d of %s still has live members after SIGKILL", pgid, name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// GroupHasLiveMembers reports whether any process of group pgid is still running. Killed
// children that are not reaped yet (zombies, whose parent is gone) do not count: they hold no
// resources and their new parent reaps them in its own time.
func GroupHasLiveMembers(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid pgrp ...
		rest := string(data)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// Tail is the last n lines of the log file at path, or why it cannot be read: what a failed
// process said last.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
