// Package benchkit is what the benchmarks share: the CPU and memory of the processes on the
// machine, the API server's request and watch counters, the accounting of a phase's cost per
// unit of work, the median and spread of repeated runs, CPU profiles summed by kind of
// request, and the results file the benchmarks append to.
package benchkit

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ticksPerSecond is USER_HZ on Linux, the unit of /proc/<pid>/stat's CPU times.
const ticksPerSecond = 100

// ProcessCPU is the user and system CPU time a process has used, from /proc/<pid>/stat (0 if
// the process is gone).
func ProcessCPU(pid int) time.Duration {
	_, f, ok := ProcStat(pid)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// ProcStat reads /proc/<pid>/stat: the command name and the fields after it, from the state
// on ("pid (comm) state ppid ..."). The command may hold spaces and parentheses, so it ends
// at the last ")".
func ProcStat(pid int) (command string, fields []string, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil, false
	}
	stat := string(data)
	open, closing := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || closing < open {
		return "", nil, false
	}
	return stat[open+1 : closing], strings.Fields(stat[closing+1:]), true
}

// ProcStatus reads the KiB fields of /proc/<pid>/status.
func ProcStatus(pid int) map[string]int {
	out := map[string]int{}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if f := strings.Fields(rest); ok && len(f) == 2 && f[1] == "kB" {
			out[name], _ = strconv.Atoi(f[0])
		}
	}
	return out
}

// Running reports whether process pid exists and has not exited (a zombie waits for its
// parent's Wait).
func Running(pid int) bool {
	_, f, ok := ProcStat(pid)
	return ok && len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// ChildrenNamed returns the processes this one started whose command is one of names.
func ChildrenNamed(names ...string) ([]int, error) {
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
		command, f, ok := ProcStat(pid)
		if !ok || len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == os.Getpid() && slices.Contains(names, command) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Memory is a process's resident memory: the high-water mark (VmHWM) and the largest
// anonymous part seen (RssAnon: the Go runtime's memory, without the binary's file-backed
// pages), in KiB.
type Memory struct{ PeakKiB, PeakAnonKiB int }

// MiB formats KiB as MiB.
func MiB(kib int) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// WatchMemory samples pid's memory every half second until the returned function is called;
// that function returns what was seen, and may be called more than once.
func WatchMemory(pid int) func() Memory {
	var m Memory
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			s := ProcStatus(pid)
			m.PeakKiB, m.PeakAnonKiB = max(m.PeakKiB, s["VmHWM"]), max(m.PeakAnonKiB, s["RssAnon"])
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	return func() Memory {
		once.Do(func() { close(done); wg.Wait() })
		return m
	}
}

// ProcessSelf is this process's id.
func ProcessSelf() int { return os.Getpid() }
