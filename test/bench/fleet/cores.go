package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
	"golang.org/x/sys/unix"
)

// splitCores runs the API server and etcd on the first core this process may use and this
// process (the raw writers, the agents and, started after this, the manager) on the others.
// On a machine this small the manager's CPU during a registration is taken from the API
// server's; split, the time to Ready against the raw pace of the same split says what the
// manager costs when the API server has its core to itself. The manager then runs with one
// core less than in a normal run, and shares it with the benchmark.
func splitCores() error {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return err
	}
	var cores []int
	for c := range len(allowed) * 64 {
		if allowed.IsSet(c) {
			cores = append(cores, c)
		}
	}
	if len(cores) < 2 {
		return fmt.Errorf("--split-cores needs at least 2 cores, this process may use %d", len(cores))
	}
	servers, err := benchkit.ChildrenNamed("kube-apiserver", "etcd")
	if err != nil {
		return err
	}
	if len(servers) < 2 {
		return fmt.Errorf("--split-cores: found %d of the API server and etcd among this process's children", len(servers))
	}
	for _, pid := range servers {
		if err := pin(pid, cores[:1]); err != nil {
			return err
		}
	}
	return pin(os.Getpid(), cores[1:])
}

// pin sets the CPU affinity of every thread of pid to cores. A thread started later inherits
// it from the thread that starts it, and a child process from its parent; a thread started
// while the threads are being pinned is caught by the next pass.
func pin(pid int, cores []int) error {
	var set unix.CPUSet
	for _, c := range cores {
		set.Set(c)
	}
	pinned := map[int]bool{}
	for {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		fresh := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || pinned[tid] {
				continue
			}
			fresh = true
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("pinning thread %d of process %d: %w", tid, pid, err)
			}
			pinned[tid] = true
		}
		if !fresh {
			return nil
		}
	}
}
