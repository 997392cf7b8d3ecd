package tracing

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/client-go/rest"
)

// InstrumentRESTConfig makes every client built from cfg count its API
// requests into the reconcile that made them (StartReconcile) and, inside a
// traced reconcile, make each a child span, whose trace context goes to the
// API server (which continues the trace when its own tracing is on).
// Requests outside a reconcile (informers, leader election) pass as they
// are. With tp off it does nothing. Call it once, before the manager is made.
func InstrumentRESTConfig(cfg *rest.Config, tp trace.TracerProvider) {
	if !Enabled(tp) {
		return
	}
	t := tp.Tracer("executor/k8s-client")
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &roundTripper{next: rt, tracer: t} })
}

type roundTripper struct {
	next   http.RoundTripper
	tracer trace.Tracer
}

var traceContext = propagation.TraceContext{}

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	countRequest(ctx)
	if !trace.SpanFromContext(ctx).IsRecording() {
		return t.next.RoundTrip(req)
	}
	// The path names the object; the span's name stays one per verb.
	ctx, span := t.tracer.Start(ctx, "k8s.api "+req.Method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(req.Method), semconv.URLPath(req.URL.Path)))
	// A RoundTripper must not change the request it is given.
	req = req.Clone(ctx)
	traceContext.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
		// 4xx are answers the reconciler expects and acts on (not found,
		// conflict, quota refusal), not failures of the request.
		if resp.StatusCode >= 500 {
			span.SetStatus(codes.Error, "HTTP "+strconv.Itoa(resp.StatusCode))
		}
	}
	End(span, err)
	return resp, err
}
