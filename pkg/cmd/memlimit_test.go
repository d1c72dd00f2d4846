package cmd

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestContainerMemoryLimit(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string]string
		want  int64
	}{
		"cgroup v2 limit":     {map[string]string{"memory.max": "268435456\n"}, 256 << 20},
		"cgroup v2 unlimited": {map[string]string{"memory.max": "max\n"}, 0},
		"cgroup v1 limit":     {map[string]string{"memory/memory.limit_in_bytes": "167772160\n"}, 160 << 20},
		"cgroup v1 unlimited": {map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0},
		"no cgroup files":     {nil, 0},
		"garbage":             {map[string]string{"memory.max": "lots\n"}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for f, v := range tc.files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, f), []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := containerMemoryLimit(root); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestApplyMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte("167772160\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// GOMEMLIMIT set by the user wins: nothing is changed.
	if got := applyMemoryLimit("300MiB", root); got != 0 || debug.SetMemoryLimit(-1) != before {
		t.Errorf("with GOMEMLIMIT set, applyMemoryLimit set %d", got)
	}
	want := int64(120 << 20) // 160 MiB less the code reserve

	if got := applyMemoryLimit("", root); got != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("soft limit %d (runtime %d), want %d", got, debug.SetMemoryLimit(-1), want)
	}
}

func TestSoftMemoryLimit(t *testing.T) {
	for limit, want := range map[int64]int64{
		64 << 20:  32 << 20,               // half: the reserve would leave the heap almost nothing
		128 << 20: 88 << 20,               // the code reserve
		256 << 20: 216 << 20,              // the code reserve
		1 << 30:   (1 << 30) - (1<<30)/10, // a tenth
	} {
		if got := SoftMemoryLimit(limit); got != want {
			t.Errorf("SoftMemoryLimit(%d MiB) = %d MiB, want %d MiB", limit>>20, got>>20, want>>20)
		}
	}
}

func TestApplyGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	// GOGC set by the user wins: nothing is changed.
	if got := applyGCPercent("200"); got != 0 || debug.SetGCPercent(100) != 100 {
		t.Errorf("with GOGC set, applyGCPercent set %d", got)
	}
	if got := applyGCPercent(""); got != DefaultGCPercent || debug.SetGCPercent(100) != DefaultGCPercent {
		t.Errorf("applyGCPercent set %d, want %d", got, DefaultGCPercent)
	}
}
