package node

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) error {
	p.stopping = true
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s (pid %d) did not die after SIGKILL", p.name, pgid)
		}
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
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
