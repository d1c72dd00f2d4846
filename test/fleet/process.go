package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
)

// Stop tiers: higher tiers stop first, so controllers go before the API servers they talk to
// and API servers before their etcd.
const (
	tierEtcd = iota
	tierAPIServer
	tierController
	tierAgent
	tierUser
)

// Process is one child process of the fleet: its own process group, its output in one log file.
type Process struct {
	Name    string
	LogPath string
	tier    int
	cmd     *exec.Cmd
	log     *os.File
	done    chan struct{}
	exitErr error
	// stopping is set before a deliberate stop, so the exit is not reported as a crash.
	mu       sync.Mutex
	stopping bool
	// stopped is set once Stop has seen the whole group gone: a later Stop (a test's, then the
	// fleet's) must not signal the group id again, which by then may belong to someone else.
	stopped bool
}

// ProcessSpec describes a process to start with StartProcess.
type ProcessSpec struct {
	// Name names the log file (<Dir>/logs/<Name>.log); unique within the fleet.
	Name string
	Path string
	Args []string
	// Env is added to the environment of the test process.
	Env []string
	// Dir is the working directory; empty means the fleet's run directory.
	Dir string
}

// Pid is the process id (also the process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Pause freezes the process group (SIGSTOP), as a machine or network that stops answering:
// the process neither acts nor notices until Resume.
func (p *Process) Pause() error { return syscall.Kill(-p.Pid(), syscall.SIGSTOP) }

// Resume lets a paused process group run again (SIGCONT).
func (p *Process) Resume() error { return syscall.Kill(-p.Pid(), syscall.SIGCONT) }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.exitErr
	default:
		return false, nil
	}
}

func (p *Process) unexpectedExit() error {
	p.mu.Lock()
	stopping := p.stopping
	p.mu.Unlock()
	if stopping {
		return nil
	}
	if done, err := p.Exited(); done {
		return fmt.Errorf("process %s (pid %d) exited: %v; last log lines:\n%s", p.Name, p.Pid(), err, node.Tail(p.LogPath, 25))
	}
	return nil
}

// Stop sends SIGTERM to the process group, waits up to grace, then sends SIGKILL.
func (p *Process) Stop(grace time.Duration) error {
	p.mu.Lock()
	p.stopping = true
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
		return nil
	}
	if err := node.StopGroup("process "+p.Name, p.Pid(), p.done, grace); err != nil {
		return err
	}
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	return nil
}

// StartProcess starts a process that belongs to the fleet: it gets its own process group, its
// stdout and stderr go to <Dir>/logs/<name>.log, it is killed if the test binary dies
// (Pdeathsig), and Stop ends it before the API servers. The e2e suites start the project's
// manager this way.
func (f *Fleet) StartProcess(spec ProcessSpec) (*Process, error) {
	return f.start(spec, tierUser)
}

func (f *Fleet) start(spec ProcessSpec, tier int) (*Process, error) {
	logPath := filepath.Join(f.dir, "logs", spec.Name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "# %s %s\n", spec.Path, strings.Join(spec.Args, " "))
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Dir = spec.Dir
	if cmd.Dir == "" {
		cmd.Dir = f.dir
	}
	// TMPDIR inside the run directory: library-go writes self-signed serving certs to a temp dir.
	tmp := filepath.Join(f.dir, "tmp", spec.Name)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		logFile.Close()
		return nil, err
	}
	cmd.Env = append(append(os.Environ(), "TMPDIR="+tmp), spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", spec.Name, err)
	}
	p := &Process{Name: spec.Name, LogPath: logPath, tier: tier, cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	f.mu.Lock()
	f.procs = append(f.procs, p)
	f.mu.Unlock()
	f.recordPid(p)
	if f.opts.OnProcess != nil {
		f.opts.OnProcess(p)
	}
	return p, nil
}

// recordPid appends the process to <Dir>/pids so a person can find strays after a crash.
func (f *Fleet) recordPid(p *Process) {
	fh, err := os.OpenFile(filepath.Join(f.dir, "pids"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer fh.Close()
	fmt.Fprintf(fh, "%d %s\n", p.Pid(), p.Name)
}

// checkProcesses returns an error naming the first fleet process that died unexpectedly.
func (f *Fleet) checkProcesses() error {
	f.mu.Lock()
	procs := append([]*Process(nil), f.procs...)
	f.mu.Unlock()
	for _, p := range procs {
		if err := p.unexpectedExit(); err != nil {
			return err
		}
	}
	return nil
}

// stopAll stops every process, highest tier first, the processes of one tier in parallel.
func (f *Fleet) stopAll() error {
	f.mu.Lock()
	procs := append([]*Process(nil), f.procs...)
	f.mu.Unlock()
	var errs []error
	for tier := tierUser; tier >= tierEtcd; tier-- {
		var wg sync.WaitGroup
		var emu sync.Mutex
		for _, p := range procs {
			if p.tier != tier {
				continue
			}
			wg.Add(1)
			go func(p *Process) {
				defer wg.Done()
				if err := p.Stop(15 * time.Second); err != nil {
					emu.Lock()
					errs = append(errs, err)
					emu.Unlock()
				}
			}(p)
		}
		wg.Wait()
	}
	return errors.Join(errs...)
}

// startBudget is how long the harness waits for a process or object it started to be ready.
const startBudget = 3 * time.Minute

// poll calls cond every interval until it returns true or an error, the timeout passes, or a
// fleet process dies.
func (f *Fleet) poll(ctx context.Context, what string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		if err := f.checkProcesses(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		ok, err := cond(ctx)
		if ok && err == nil {
			return nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("timed out after %s waiting for %s: %w", timeout, what, lastErr)
			}
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// ports hands out free TCP ports on 127.0.0.1, never the same one twice.
type ports struct {
	mu   sync.Mutex
	used map[int]bool
}

// freePorts is shared by every fleet of the process: the e2e lanes start their fleets at once,
// and a port handed to one fleet's process, not yet bound, must not go to another fleet's.
var freePorts ports

func (p *ports) next() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used == nil {
		p.used = map[int]bool{}
	}
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !p.used[port] {
			p.used[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port found")
}
