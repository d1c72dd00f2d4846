package benchkit

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// ResultsFile is the file every benchmark appends its runs to.
func ResultsFile() string { return filepath.Join(testenv.RepoRoot(), "docs", "scale-results.md") }

// ResultsFlag registers --results: where the run is appended ("" for nowhere).
func ResultsFlag() *string {
	return flag.String("results", ResultsFile(), "append this run (machine, commit, command, output) to this file; empty for none")
}

// Output is what a benchmark prints: to stdout, and kept for the results file.
type Output struct {
	bytes.Buffer
	w io.Writer
}

// NewOutput prints to stdout.
func NewOutput() *Output { return &Output{w: os.Stdout} }

func (o *Output) Write(p []byte) (int, error) {
	_, _ = o.Buffer.Write(p)
	return o.w.Write(p)
}

// Printf prints to the output.
func (o *Output) Printf(format string, args ...any) { _, _ = fmt.Fprintf(o, format, args...) }

// Append appends the run to path (nothing when path is empty): a heading with the date and
// the benchmark, the machine, the commit, the command, and the output.
func (o *Output) Append(path, bench string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "\n### %s, %s\n\n- machine: %s\n- commit: %s\n- command: `go run ./test/bench/%s %s`\n\n```\n%s```\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), bench, Machine(), Commit(), bench, strings.Join(os.Args[1:], " "), o.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		fmt.Fprintf(os.Stderr, "appended to %s\n", path)
	}
	return err
}

// Machine says what this machine is: the CPU model, the cores this process may use, the
// memory, and the load when the run ended (other users' work shows there).
func Machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kib int
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kib); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kib)/(1<<20))
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = fmt.Sprintf(", load %s %s %s at the end", f[0], f[1], f[2])
		}
	}
	return fmt.Sprintf("%s, %d cores%s, %s/%s%s", model, runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH, load)
}

// Commit is the checkout's commit, "-dirty" when it has changes.
func Commit() string {
	out, err := exec.Command("git", "-C", testenv.RepoRoot(), "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
