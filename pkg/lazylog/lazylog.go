// Package lazylog wraps a logr.LogSink so that WithValues costs little until a line is
// written. controller-runtime gives every reconcile a logger with the request's name,
// namespace and reconcile ID, and zap encodes those values into a copy of its encoder at once,
// whether or not anything is ever logged: at 10,000 clusters that was about 4 % of everything
// the manager allocated, on a manager that logs only errors. The values are kept here instead
// and handed to the wrapped sink only for a line that is enabled.
//
// So a value is encoded when a line is written, not when it is given: a value changed in
// between logs as it is then (the values given here are names and IDs, never changed), and
// each enabled line encodes the logger's values again.
package lazylog

import "github.com/go-logr/logr"

// New wraps logger's sink.
func New(logger logr.Logger) logr.Logger {
	base := logger.GetSink()
	if base == nil {
		return logger
	}
	// base was initialised by logger already; it only needs to skip this package's frame to
	// report the caller that logged.
	if cd, ok := base.(logr.CallDepthLogSink); ok {
		base = cd.WithCallDepth(1)
	}
	return logr.New(&sink{base: base})
}

type sink struct {
	base logr.LogSink
	// values are the key-value pairs given to WithValues and not yet to base, in order.
	values []any
}

var (
	_ logr.LogSink          = &sink{}
	_ logr.CallDepthLogSink = &sink{}
)

// Init does nothing: the wrapped sink was initialised when it was made (New).
func (s *sink) Init(logr.RuntimeInfo) {}

func (s *sink) Enabled(level int) bool { return s.base.Enabled(level) }

func (s *sink) Info(level int, msg string, keysAndValues ...any) {
	s.resolved().Info(level, msg, keysAndValues...)
}

func (s *sink) Error(err error, msg string, keysAndValues ...any) {
	s.resolved().Error(err, msg, keysAndValues...)
}

// resolved is base with the values kept so far.
func (s *sink) resolved() logr.LogSink {
	if len(s.values) == 0 {
		return s.base
	}
	return s.base.WithValues(s.values...)
}

func (s *sink) WithValues(keysAndValues ...any) logr.LogSink {
	values := make([]any, 0, len(s.values)+len(keysAndValues))
	return &sink{base: s.base, values: append(append(values, s.values...), keysAndValues...)}
}

func (s *sink) WithName(name string) logr.LogSink {
	return &sink{base: s.base.WithName(name), values: s.values}
}

func (s *sink) WithCallDepth(depth int) logr.LogSink {
	base := s.base
	if cd, ok := base.(logr.CallDepthLogSink); ok {
		base = cd.WithCallDepth(depth)
	}
	return &sink{base: base, values: s.values}
}
