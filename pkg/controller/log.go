package controller

import (
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// reconcileLogger is the logger of one reconcile, with the keys
// controller-runtime's builder would give it. The keys are kept aside and
// encoded only when the reconcile logs: zap encodes a logger's values as they
// are added, and every reconcile gets its request's and its reconcile ID's,
// although most log nothing (a profile at N=10,000 had this encoding as the
// largest single source of allocations).
func reconcileLogger(base logr.Logger) func(*reconcile.Request) logr.Logger {
	l := logr.New(&deferredValues{base: base.WithCallDepth(1).GetSink()}).WithValues(
		"controller", "taskaction", "controllerGroup", "flyte.org", "controllerKind", "TaskAction")
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return l
		}
		return l.WithValues("TaskAction", klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name)
	}
}

// deferredValues is a log sink that hands its key-value pairs to the sink it
// wraps only when a line is written. Values are encoded at that moment, so
// they must not change after they are added (the request, an ID, strings).
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
