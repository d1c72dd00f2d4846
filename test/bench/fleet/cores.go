package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// splitCores runs the API server and etcd on the first core and this process (the raw
// writers, the agents and, started after this, the manager) on the others. On a machine this
// small the manager's CPU during a registration is taken from the API server's; split, the
// time to Ready against the raw pace of the same split says what the manager costs when it
// has cores of its own, as it has on a real hub.
func splitCores() error {
	if runtime.NumCPU() < 2 {
		return fmt.Errorf("--split-cores needs at least 2 cores, this machine has %d", runtime.NumCPU())
	}
	servers, err := childrenNamed("kube-apiserver", "etcd")
	if err != nil {
		return err
	}
	if len(servers) < 2 {
		return fmt.Errorf("--split-cores: found %d of the API server and etcd among this process's children", len(servers))
	}
	for _, pid := range servers {
		if err := pin(pid, 0, 1); err != nil {
			return err
		}
	}
	return pin(os.Getpid(), 1, runtime.NumCPU())
}

// pin sets the CPU affinity of every thread of pid to cores [from, to). Threads started later
// inherit it from the thread that starts them, and a child process from its parent.
func pin(pid, from, to int) error {
	var set unix.CPUSet
	for c := from; c < to; c++ {
		set.Set(c)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pinning thread %d of process %d: %w", tid, pid, err)
		}
	}
	return nil
}

// childrenNamed returns the processes this one started whose command is one of names.
func childrenNamed(names ...string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": the command may hold spaces, so split at the last ")".
		open, closing := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(string(stat[closing+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == os.Getpid() && slices.Contains(names, string(stat[open+1:closing])) {
			out = append(out, pid)
		}
	}
	return out, nil
}
