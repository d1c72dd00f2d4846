package lazylog

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// countingSink counts what reaches the wrapped sink.
type countingSink struct {
	logr.LogSink
	withValues *int
}

// Init does nothing: the funcr sink inside was initialised by funcr.New.
func (c countingSink) Init(logr.RuntimeInfo) {}

func (c countingSink) WithValues(kv ...any) logr.LogSink {
	*c.withValues++
	return countingSink{LogSink: c.LogSink.WithValues(kv...), withValues: c.withValues}
}

func (c countingSink) WithName(name string) logr.LogSink {
	return countingSink{LogSink: c.LogSink.WithName(name), withValues: c.withValues}
}

func (c countingSink) WithCallDepth(depth int) logr.LogSink {
	return countingSink{LogSink: c.LogSink.(logr.CallDepthLogSink).WithCallDepth(depth), withValues: c.withValues}
}

func newLogger(verbosity int) (logr.Logger, *[]string, *int) {
	var lines []string
	calls := 0
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) },
		funcr.Options{Verbosity: verbosity, LogCaller: funcr.All})
	return New(logr.New(countingSink{LogSink: base.GetSink(), withValues: &calls})), &lines, &calls
}

func TestValuesReachTheSinkOnlyWithALine(t *testing.T) {
	log, lines, calls := newLogger(0)
	perRequest := log.WithName("controller").WithValues("namespace", "ns", "name", "a").WithValues("reconcileID", "1")
	perRequest.V(1).Info("not enabled")
	if *calls != 0 || len(*lines) != 0 {
		t.Fatalf("without an enabled line the sink got %d WithValues call(s) and %d line(s)", *calls, len(*lines))
	}

	perRequest.Error(errors.New("boom"), "reconcile failed", "step", "sign")
	if len(*lines) != 1 {
		t.Fatalf("got %d lines, want 1", len(*lines))
	}
	line := (*lines)[0]
	for _, want := range []string{`"namespace"="ns"`, `"name"="a"`, `"reconcileID"="1"`, `"step"="sign"`, `"error"="boom"`, "controller", "lazylog_test.go"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %s", line, want)
		}
	}
	// The caller is the line that logged, not this package's wrapper.
	if strings.Contains(line, "lazylog.go") {
		t.Errorf("line %q names the wrapper as its caller", line)
	}
}

func TestDerivedLoggersKeepTheirOwnValues(t *testing.T) {
	log, lines, _ := newLogger(0)
	// Three calls leave the parent's values with room to grow, where two children appending
	// in place would write over each other.
	parent := log.WithValues("a", 1).WithValues("b", 2).WithValues("c", 3)
	left, right := parent.WithValues("side", "left"), parent.WithValues("side", "right")
	left.Info("l")
	right.Info("r")
	// controller-runtime's delegating logger asks for a call depth after each WithValues.
	parent.WithValues("d", 4).WithCallDepth(0).WithName("named").Info("kept")
	want := []string{
		`"a"=1 "b"=2 "c"=3 "side"="left"`,
		`"a"=1 "b"=2 "c"=3 "side"="right"`,
		`"a"=1 "b"=2 "c"=3 "d"=4`,
	}
	if len(*lines) != len(want) {
		t.Fatalf("got %d lines, want %d: %q", len(*lines), len(want), *lines)
	}
	for i, w := range want {
		if !strings.HasSuffix((*lines)[i], w) {
			t.Errorf("line %d is %q, want it to end with %s", i+1, (*lines)[i], w)
		}
	}
	if !strings.Contains((*lines)[2], "named") {
		t.Errorf("line %q lacks the name", (*lines)[2])
	}
}

// BenchmarkPerReconcileLogger is what controller-runtime does for each reconcile when nothing
// is logged: a logger with the request's values, on the manager's zap logger at its error
// level.
func BenchmarkPerReconcileLogger(b *testing.B) {
	base := crzap.New(crzap.WriteTo(io.Discard), crzap.Level(zapcore.ErrorLevel))
	for name, log := range map[string]logr.Logger{"zap": base, "lazy": New(base)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l := log.WithValues("GitOpsCluster", klog.KRef("ns", "a"), "namespace", "ns", "name", "a").WithValues("reconcileID", "x")
				l.V(1).Info("Reconcile successful")
			}
		})
	}
}
