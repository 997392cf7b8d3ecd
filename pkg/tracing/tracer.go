package tracing

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracer starts spans, or, when tracing is off (its zero value), hands back
// the context as it is and a span that does nothing, without allocating:
// the hot paths (each reconcile, each event) pay nothing for tracing that
// is not configured.
type Tracer struct{ t trace.Tracer }

// NewTracer is the tracer named scope of tp; off when tp makes no spans.
func NewTracer(tp trace.TracerProvider, scope string) Tracer {
	if !Enabled(tp) {
		return Tracer{}
	}
	return Tracer{t: tp.Tracer(scope)}
}

// On says whether spans are made.
func (t Tracer) On() bool { return t.t != nil }

// none is the span of a tracer that is off: the no-op span of an empty context.
var none = trace.SpanFromContext(context.Background())

// Start starts a child of ctx's span. Callers that set attributes do so
// only when span.IsRecording(), so that nothing is built for a span that
// keeps nothing.
func (t Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t.t == nil {
		return ctx, none
	}
	return t.t.Start(ctx, name, opts...)
}

// End ends span, marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Attributes of the executor's spans.
const (
	AttrNamespace   = attribute.Key("taskaction.namespace")
	AttrName        = attribute.Key("taskaction.name")
	AttrAttempt     = attribute.Key("taskaction.attempt")
	AttrPhase       = attribute.Key("taskaction.phase")
	AttrEvents      = attribute.Key("taskaction.events")
	AttrAPIRequests = attribute.Key("k8s.api.requests")
	AttrRequeue     = attribute.Key("reconcile.requeue_after")
)

// Reconcile is the span of one reconcile, and the count of the API
// requests made within it (RESTConfig's transport counts those whose
// context carries it). A nil *Reconcile, the one of a tracer that is off,
// does nothing.
type Reconcile struct {
	span     trace.Span
	requests atomic.Int64
}

type requestsKey struct{}

// StartReconcile starts the span of a reconcile of namespace/name; nil and
// ctx as it is when t is off.
func (t Tracer) StartReconcile(ctx context.Context, namespace, name string) (context.Context, *Reconcile) {
	if t.t == nil {
		return ctx, nil
	}
	r := &Reconcile{}
	ctx, r.span = t.t.Start(ctx, "taskaction.Reconcile", trace.WithAttributes(AttrNamespace.String(namespace), AttrName.String(name)))
	return context.WithValue(ctx, requestsKey{}, r), r
}

// Decided records what the reconcile decided: the attempt, the phase of
// the new status and the phases of the events it reports.
func (r *Reconcile) Decided(attempt uint32, phase string, events []string) {
	if r == nil || !r.span.IsRecording() {
		return
	}
	r.span.SetAttributes(AttrAttempt.Int64(int64(attempt)), AttrPhase.String(phase), AttrEvents.StringSlice(events))
}

// End ends the span with the API requests counted, when the reconcile asked
// to look again, and its error.
func (r *Reconcile) End(requeueAfter time.Duration, err error) {
	if r == nil {
		return
	}
	if r.span.IsRecording() {
		r.span.SetAttributes(AttrAPIRequests.Int64(r.requests.Load()))
		if requeueAfter > 0 {
			r.span.SetAttributes(AttrRequeue.String(requeueAfter.String()))
		}
	}
	End(r.span, err)
}

// APIRequests is the count so far.
func (r *Reconcile) APIRequests() int64 {
	if r == nil {
		return 0
	}
	return r.requests.Load()
}

// countRequest counts one API request into the reconcile of ctx, if any.
func countRequest(ctx context.Context) {
	if r, ok := ctx.Value(requestsKey{}).(*Reconcile); ok {
		r.requests.Add(1)
	}
}
