// Package lazylog keeps a logger's key-value pairs aside until it writes a
// line. zap encodes values as they are added, and controller-runtime adds a
// request's to the logger of every reconcile and every admission request,
// most of which log nothing: at N=10,000 that encoding was the executor's
// largest single source of allocations.
package lazylog

import "github.com/go-logr/logr"

// New is l with its added values kept aside until a line is written. They are
// encoded at that moment, so they must not change after they are added (a
// request, an ID, strings).
func New(l logr.Logger) logr.Logger {
	return logr.New(&deferredValues{base: l.WithCallDepth(1).GetSink()})
}

// deferredValues hands its key-value pairs to the sink it wraps only when a
// line is written.
type deferredValues struct {
	base logr.LogSink
	kv   []any
}

var _ logr.CallDepthLogSink = (*deferredValues)(nil)

// Init is a no-op: the wrapped sink was initialised, one frame deeper, when
// it was made.
func (s *deferredValues) Init(logr.RuntimeInfo) {}

func (s *deferredValues) Enabled(level int) bool { return s.base.Enabled(level) }

func (s *deferredValues) Info(level int, msg string, kv ...any) {
	s.withValues().Info(level, msg, kv...)
}

func (s *deferredValues) Error(err error, msg string, kv ...any) {
	s.withValues().Error(err, msg, kv...)
}

func (s *deferredValues) withValues() logr.LogSink {
	if len(s.kv) == 0 {
		return s.base
	}
	return s.base.WithValues(s.kv...)
}

func (s *deferredValues) WithValues(kv ...any) logr.LogSink {
	all := make([]any, 0, len(s.kv)+len(kv))
	return &deferredValues{base: s.base, kv: append(append(all, s.kv...), kv...)}
}

func (s *deferredValues) WithName(name string) logr.LogSink {
	return &deferredValues{base: s.base.WithName(name), kv: s.kv}
}

func (s *deferredValues) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.base.(logr.CallDepthLogSink); ok {
		return &deferredValues{base: cd.WithCallDepth(depth), kv: s.kv}
	}
	return s
}
