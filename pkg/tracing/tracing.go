// Package tracing exports OpenTelemetry traces as Flyte's `otel:` section
// says (config.OtelConfig), and holds the few helpers the executor and the
// embedded services share: a Tracer that costs nothing when tracing is off,
// the reconcile span with its API request count, and the connect
// interceptors that carry a trace from the executor into the events and
// cache services.
//
// Nothing here touches OpenTelemetry's globals: every provider is passed in,
// so that tests and several managers in one process never share one.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/taskaction/executor/pkg/config"
)

// Service names (the service.name of the spans' resource), Flyte's.
const (
	ServiceExecutor = "executor"
	ServiceEvents   = "events-service"
	ServiceCache    = "cache-service"
)

// Enabled says whether tp makes spans: nil and OpenTelemetry's no-op
// provider do not, and the code that would feed them skips its work.
func Enabled(tp trace.TracerProvider) bool {
	if tp == nil {
		return false
	}
	_, off := tp.(noop.TracerProvider)
	return !off
}

// Exporter is the destination of one process's spans, from the otel
// section, with a TracerProvider per service (`executor local` runs three
// services in one process, writing one file). Shutdown flushes them all.
type Exporter struct {
	exporter sdktrace.SpanExporter // nil: noop
	sampler  sdktrace.Sampler
	file     *os.File

	mu        sync.Mutex
	providers map[string]*sdktrace.TracerProvider
	closed    bool
}

// Open sets up the exporter cfg names; with noop (the default) it creates
// nothing and every Provider is the no-op one. The OTLP exporters connect
// lazily: Open never waits for a collector. They also read the standard
// OTEL_EXPORTER_OTLP_* variables (headers, certificates, timeouts); the
// endpoint of the section wins over the variables'.
func Open(ctx context.Context, cfg config.OtelConfig) (*Exporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Exporter{providers: map[string]*sdktrace.TracerProvider{}}
	var err error
	switch cfg.Type {
	case config.OtelNoop:
		return e, nil
	case config.OtelFile:
		// Created afresh at each start, as Flyte does.
		if e.file, err = os.Create(cfg.File.Filename); err != nil {
			return nil, fmt.Errorf("otel.file.filename: %w", err)
		}
		e.exporter, err = stdouttrace.New(stdouttrace.WithWriter(e.file), stdouttrace.WithPrettyPrint())
	case config.OtelOtlpGrpc:
		e.exporter, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.OtlpGrpc.Endpoint))
	case config.OtelOtlpHTTP:
		e.exporter, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.OtlpHTTP.Endpoint))
	}
	if err != nil {
		if e.file != nil {
			_ = e.file.Close()
		}
		return nil, fmt.Errorf("otel: %s exporter: %w", cfg.Type, err)
	}
	// Parent-based, as Flyte's: a span whose caller sent a trace context
	// follows the caller's sampling decision, so a trace is kept or dropped
	// whole across the executor and the services.
	switch cfg.Sampler.ParentSampler {
	case config.OtelSampleTraceID:
		e.sampler = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Sampler.TraceIDRatio))
	default:
		e.sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	return e, nil
}

// Enabled says whether spans are exported.
func (e *Exporter) Enabled() bool { return e != nil && e.exporter != nil }

// Provider is the TracerProvider of service (one per name, made on first
// use), or the no-op provider when tracing is off or e is shut down.
func (e *Exporter) Provider(service string) trace.TracerProvider {
	if !e.Enabled() {
		return noop.NewTracerProvider()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return noop.NewTracerProvider()
	}
	if tp, ok := e.providers[service]; ok {
		return tp
	}
	// The SDK's default resource (its own attributes, and
	// OTEL_RESOURCE_ATTRIBUTES) with the service's name over any other:
	// schemaless, so the merge never meets two schema URLs.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		res = resource.NewSchemaless(semconv.ServiceName(service))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(sharedExporter{e.exporter}),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(e.sampler),
	)
	e.providers[service] = tp
	return tp
}

// Shutdown flushes every provider's spans, then closes the exporter (and
// its file). Spans started afterwards are dropped. Safe to call twice.
func (e *Exporter) Shutdown(ctx context.Context) error {
	if !e.Enabled() {
		return nil
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	providers := e.providers
	e.mu.Unlock()
	var errs []error
	for _, tp := range providers {
		errs = append(errs, tp.Shutdown(ctx))
	}
	errs = append(errs, e.exporter.Shutdown(ctx))
	if e.file != nil {
		errs = append(errs, e.file.Close())
	}
	return errors.Join(errs...)
}

// sharedExporter lets several providers feed one exporter: a provider's
// shutdown flushes its own spans but leaves the exporter to
// Exporter.Shutdown, which closes it once, after all of them.
type sharedExporter struct{ sdktrace.SpanExporter }

func (sharedExporter) Shutdown(context.Context) error { return nil }

// ShutdownOnStop is a runnable for a controller-runtime manager, run by
// every replica (leader or not), that shuts e down when the manager stops.
// A failure to flush (a collector gone) is logged: it must not fail the stop.
func (e *Exporter) ShutdownOnStop(log logr.Logger) interface {
	Start(context.Context) error
	NeedLeaderElection() bool
} {
	return shutdownOnStop{e: e, log: log}
}

// shutdownTimeout bounds the last flush at stop.
const shutdownTimeout = 5 * time.Second

type shutdownOnStop struct {
	e   *Exporter
	log logr.Logger
}

func (s shutdownOnStop) NeedLeaderElection() bool { return false }

func (s shutdownOnStop) Start(ctx context.Context) error {
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := s.e.Shutdown(sctx); err != nil {
		s.log.Error(err, "flushing the last spans failed")
	}
	return nil
}
