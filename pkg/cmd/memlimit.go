package cmd

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// codeReserve is what a cgroup charges the manager besides the Go runtime's own memory: mostly
// the binary's code and data pages, about 40 MiB resident at 5,000 clusters (RssFile in
// /proc/<pid>/status). The runtime's soft limit does not count them, so a limit that left only
// a tenth of a small container for them let the heap fill the container and the kernel evict
// the manager's own code pages.
const codeReserve = 40 << 20

// SoftMemoryLimit is the Go runtime's soft memory limit for a container memory limit: the limit
// less the larger of codeReserve and a tenth (stacks, buffers, the kernel's share), but never
// below half the limit, where the collector would run without pause. Without a soft limit the
// heap doubles between collections, and a manager whose live heap is 50 MiB peaks above 200 MiB
// after a fleet's first registration.
func SoftMemoryLimit(limit int64) int64 {
	return max(limit-max(limit/10, codeReserve), limit/2)
}

// DefaultGCPercent is the collector's target the manager runs with unless GOGC is set. Most of
// its heap is the informer cache, which lives as long as the process; Go's default of 100 lets
// the garbage of a fleet's registration or a renewal wave grow the heap to twice that before a
// collection. At 5,000 clusters that garbage, not the cache, set the peak. At 50 the heap
// grows by half the live heap between collections; a collection is about twice as frequent
// while the manager allocates, and it allocates little between fleet events.
const DefaultGCPercent = 50

// applyGCPercent sets the collector's target to DefaultGCPercent unless GOGC is set (goGC).
// It returns the percentage it set, or 0.
func applyGCPercent(goGC string) int {
	if goGC != "" {
		return 0
	}
	debug.SetGCPercent(DefaultGCPercent)
	return DefaultGCPercent
}

// applyMemoryLimit sets the runtime's soft memory limit to SoftMemoryLimit of the container's
// memory limit (read from the cgroup file system under cgroupRoot), unless GOMEMLIMIT is set
// (goMemLimit) or there is no limit. It returns the limit it set, or 0.
func applyMemoryLimit(goMemLimit, cgroupRoot string) int64 {
	if goMemLimit != "" {
		return 0
	}
	limit := containerMemoryLimit(cgroupRoot)
	if limit <= 0 {
		return 0
	}
	soft := SoftMemoryLimit(limit)
	debug.SetMemoryLimit(soft)
	return soft
}

// containerMemoryLimit reads cgroup v2's memory.max, else cgroup v1's
// memory/memory.limit_in_bytes; 0 when neither sets a limit.
func containerMemoryLimit(root string) int64 {
	for _, f := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		// cgroup v1 reports "no limit" as a number near the largest page-aligned int64.
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0
		}
		return n
	}
	return 0
}
