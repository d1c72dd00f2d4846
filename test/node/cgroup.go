package node

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMounts returns the mount points of the cgroup hierarchies (v1 and v2) seen from here.
func cgroupMounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		for i, x := range fields {
			if x == "-" && i+1 < len(fields) && (fields[i+1] == "cgroup" || fields[i+1] == "cgroup2") {
				out = append(out, unescapeMount(fields[4]))
			}
		}
	}
	return out
}

// makeCgroups creates the kubelet's cgroup root in every v1 hierarchy (the kubelet expects it
// there), with cpuset's CPUs and memory nodes copied from the top, which a new cpuset lacks.
// The machine's hierarchies are only added to, never remounted.
func (n *Node) makeCgroups() error {
	for _, m := range cgroupMounts() {
		if _, err := os.Stat(filepath.Join(m, "cgroup.controllers")); err == nil {
			continue // the v2 hierarchy of a hybrid layout: the kubelet runs in v1 mode
		}
		dir := filepath.Join(m, n.CgroupRoot())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(m, f))
			if err != nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
			}
		}
	}
	return nil
}

// cgroupDirs lists the node's cgroup folders in every hierarchy, deepest first.
func (n *Node) cgroupDirs() []string {
	var dirs []string
	for _, m := range cgroupMounts() {
		root := filepath.Join(m, n.CgroupRoot())
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}

// cgroupPids lists the processes in the node's cgroups.
func (n *Node) cgroupPids() []int {
	seen := map[int]bool{}
	var pids []int
	for _, d := range n.cgroupDirs() {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// removeCgroups kills whatever still runs in the node's cgroups and removes them, deepest
// first, in every hierarchy (runc also creates the pods' cgroups in a hybrid layout's v2 one).
func (n *Node) removeCgroups() error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, pid := range n.cgroupPids() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		var errs []error
		for _, d := range n.cgroupDirs() {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
			}
		}
		if len(errs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(errs...)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
