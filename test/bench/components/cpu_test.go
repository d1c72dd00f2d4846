package main

import (
	"strings"
	"testing"
	"time"
)

func TestSinceSaysAProcessRestarted(t *testing.T) {
	before := processCPU{
		"manager":   {pid: 10, used: 5 * time.Second},
		"apiserver": {pid: 11, used: 2 * time.Second},
	}
	after := processCPU{
		"manager":   {pid: 20, used: 1 * time.Second},
		"apiserver": {pid: 11, used: 9 * time.Second},
		"newcomer":  {pid: 30, used: 3 * time.Second},
	}
	got := since(after, before)
	if s := got["manager"]; !s.restarted || s.used != time.Second {
		t.Errorf("manager: got %+v, want restarted with 1s since", s)
	}
	if s := got["apiserver"]; s.restarted || s.used != 7*time.Second {
		t.Errorf("apiserver: got %+v, want 7s", s)
	}
	if s := got["newcomer"]; s.restarted || s.used != 3*time.Second {
		t.Errorf("newcomer: got %+v, want 3s and not restarted", s)
	}
	line := got.String()
	for _, want := range []string{"apiserver 7.0s", "newcomer 3.0s", "manager restarted (1.0s since)"} {
		if !strings.Contains(line, want) {
			t.Errorf("String() = %q, want it to hold %q", line, want)
		}
	}
	if strings.Index(line, "apiserver") > strings.Index(line, "newcomer") {
		t.Errorf("String() = %q: the busiest process comes first", line)
	}
}
