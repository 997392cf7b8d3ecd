package tracing

import (
	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/trace"
)

// ClientOptions make a connect client send the caller's trace context (W3C
// traceparent) with each call, under a client span; none when tp is off.
func ClientOptions(tp trace.TracerProvider) []connect.ClientOption {
	if i := interceptor(tp, false); i != nil {
		return []connect.ClientOption{connect.WithInterceptors(i)}
	}
	return nil
}

// HandlerOptions make a connect handler continue the caller's trace with a
// server span per call; none when tp is off.
func HandlerOptions(tp trace.TracerProvider) []connect.HandlerOption {
	if i := interceptor(tp, true); i != nil {
		return []connect.HandlerOption{connect.WithInterceptors(i)}
	}
	return nil
}

func interceptor(tp trace.TracerProvider, server bool) connect.Interceptor {
	if !Enabled(tp) {
		return nil
	}
	opts := []otelconnect.Option{
		otelconnect.WithTracerProvider(tp),
		// W3C trace context, given here: the global propagator does nothing
		// unless a program sets it, and this package sets no global.
		otelconnect.WithPropagator(traceContext),
		// The services and the executor have their own Prometheus metrics.
		otelconnect.WithoutMetrics(),
		// One event per message adds little to a unary call's span.
		otelconnect.WithoutTraceEvents(),
	}
	if server {
		// Continue the caller's trace instead of starting one linked to it
		// (otelconnect's default), so that one trace shows a TaskAction's
		// reconcile down to the service's work. A caller can thereby choose
		// the trace and its sampling; the services are the executor's own.
		opts = append(opts, otelconnect.WithTrustRemote(), otelconnect.WithoutServerPeerAttributes())
	}
	i, err := otelconnect.NewInterceptor(opts...)
	if err != nil {
		// Only the instruments of metrics can fail to be made, and metrics are off.
		return nil
	}
	return i
}
