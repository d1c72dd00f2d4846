package main

import (
	"testing"
	"time"
)

// TestSinceSaysWhatItCannotMeasure: a process that exited has no CPU to read (0, which a
// difference would turn negative); it is named as such, never printed as a figure or hidden by
// the 0.1 s filter.
func TestSinceSaysWhatItCannotMeasure(t *testing.T) {
	before := processCPU{
		"manager":   {used: 5 * time.Second},
		"apiserver": {used: 2 * time.Second},
	}
	after := processCPU{
		"manager":   {exited: true},
		"apiserver": {used: 9 * time.Second},
		"newcomer":  {used: 3 * time.Second},
	}
	got := since(after, before)
	want := map[string]cpuSample{
		"manager":   {exited: true},
		"apiserver": {used: 7 * time.Second},
		"newcomer":  {used: 3 * time.Second},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: got %+v, want %+v", name, got[name], w)
		}
	}
	if line, w := got.String(), "apiserver 7.0s, newcomer 3.0s, manager exited"; line != w {
		t.Errorf("String() = %q, want %q", line, w)
	}
	if s, w := got.perCluster("manager", 1000), "unknown (it exited)"; s != w {
		t.Errorf("perCluster(manager) = %q, want %q", s, w)
	}
	if s, w := got.perCluster("apiserver", 1000), "7.00 ms"; s != w {
		t.Errorf("perCluster(apiserver) = %q, want %q", s, w)
	}
}
