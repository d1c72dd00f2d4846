package main

import (
	"strings"
	"testing"
	"time"
)

// TestSinceSaysWhatItCannotMeasure: a process that exited has no CPU to read (0, which a
// difference would turn negative) and one started again counts from its new start; both are
// named as such, never printed as a figure or hidden by the 0.1 s filter.
func TestSinceSaysWhatItCannotMeasure(t *testing.T) {
	before := processCPU{
		"manager":   {pid: 10, used: 5 * time.Second, running: true},
		"apiserver": {pid: 11, used: 2 * time.Second, running: true},
		"placement": {pid: 12, used: 4 * time.Second, running: true},
	}
	after := processCPU{
		"manager":   {pid: 20, used: 1 * time.Second, running: true},
		"apiserver": {pid: 11, used: 9 * time.Second, running: true},
		"placement": {pid: 12, running: false},
		"newcomer":  {pid: 30, used: 3 * time.Second, running: true},
	}
	got := since(after, before)
	want := map[string]cpuSample{
		"manager":   {pid: 20, used: time.Second, running: true, restarted: true},
		"apiserver": {pid: 11, used: 7 * time.Second, running: true},
		"placement": {pid: 12, exited: true},
		"newcomer":  {pid: 30, used: 3 * time.Second, running: true},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: got %+v, want %+v", name, got[name], w)
		}
	}
	if line, w := got.String(), "apiserver 7.0s, newcomer 3.0s, manager restarted (1.0s since), placement exited"; line != w {
		t.Errorf("String() = %q, want %q", line, w)
	}
	for name, w := range map[string]string{"manager": "restarted", "placement": "exited", "apiserver": "ms"} {
		if s := got.perCluster(name, 1000); !strings.Contains(s, w) {
			t.Errorf("perCluster(%s) = %q, want it to say %q", name, s, w)
		}
	}
}
