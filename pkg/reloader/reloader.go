// Package reloader restarts a process when the certificate files it read at start-up change.
// argocd-agent loads its client certificate only when it starts; run as a sidecar in a pod with
// a shared process namespace, the reloader sends the agent SIGTERM after OCM renews the mounted
// certificate, and the kubelet restarts the agent container, which then reads the new files.
package reloader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// Options configure Run.
type Options struct {
	// WatchDir holds the mounted certificate (tls.crt, tls.key); every regular file in it counts.
	WatchDir string
	// ProcessName is the base name of argv[0] of the processes to signal.
	ProcessName string
	// Interval between checks. Polling survives the kubelet's atomic symlink swaps of secret
	// volumes, which file-event watches can miss.
	Interval time.Duration
	// ProcRoot is /proc; tests may point it elsewhere.
	ProcRoot string
	// Signal is sent to every matching process (SIGTERM by default).
	Signal syscall.Signal
}

// DirHash returns a digest of the names and contents of the regular files in dir (following
// symlinks), so any change of the certificate or key changes it.
func DirHash(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") { // the kubelet's timestamped data folders
			continue
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		p := filepath.Join(dir, n)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// FindProcesses returns the ids of processes whose argv[0] base name is name.
func FindProcesses(procRoot, name string) ([]int, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		argv0 := string(cmdline)
		if i := strings.IndexByte(argv0, 0); i >= 0 {
			argv0 = argv0[:i]
		}
		if filepath.Base(argv0) == name {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out, nil
}

// Run polls WatchDir until ctx ends and signals the named processes whenever its content
// differs from what it was when they were last (re)started.
func Run(ctx context.Context, log logr.Logger, o Options) error {
	if o.WatchDir == "" || o.ProcessName == "" {
		return fmt.Errorf("both a watch directory and a process name are required")
	}
	if o.Interval <= 0 {
		o.Interval = 10 * time.Second
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.Signal == 0 {
		o.Signal = syscall.SIGTERM
	}
	// The files may not exist yet: OCM mounts the secret once the certificate is issued.
	last, _ := DirHash(o.WatchDir)
	log.Info("watching", "dir", o.WatchDir, "process", o.ProcessName, "interval", o.Interval)
	ticker := time.NewTicker(o.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		cur, err := DirHash(o.WatchDir)
		if err != nil || cur == last {
			continue
		}
		pids, err := FindProcesses(o.ProcRoot, o.ProcessName)
		if err != nil {
			log.Error(err, "listing processes")
			continue
		}
		if len(pids) == 0 {
			// Nothing to restart yet; try again on the next change-free tick.
			log.Info("certificate changed but no process to restart", "process", o.ProcessName)
			continue
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, o.Signal); err != nil {
				log.Error(err, "signalling", "pid", pid)
				continue
			}
			log.Info("certificate changed; restarting", "process", o.ProcessName, "pid", pid)
		}
		last = cur
	}
}
