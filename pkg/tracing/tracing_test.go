package tracing_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/client-go/rest"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/tracing"
)

// The default section creates nothing: the providers are the no-op one and
// every tracer is off.
func TestNoopByDefault(t *testing.T) {
	e, err := tracing.Open(context.Background(), config.Default().Otel)
	if err != nil {
		t.Fatal(err)
	}
	tp := e.Provider(tracing.ServiceExecutor)
	if e.Enabled() || tracing.Enabled(tp) || tracing.NewTracer(tp, "x").On() {
		t.Fatalf("noop: exporter enabled %v, provider %T enabled", e.Enabled(), tp)
	}
	if tracing.Enabled(nil) || tracing.NewTracer(nil, "x").On() {
		t.Fatal("a nil provider makes spans")
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Off, the spans of a reconcile, an event or a cache call cost no
// allocation: the hot paths pay nothing for tracing that is not configured.
func TestOffAllocatesNothing(t *testing.T) {
	off := tracing.NewTracer(noop.NewTracerProvider(), "x")
	ctx := context.Background()
	err := errors.New("x")
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := off.Start(ctx, "cache.Get")
		if span.IsRecording() {
			t.Fatal("recording")
		}
		tracing.End(span, err)
		c, rs := off.StartReconcile(c, "ns", "name")
		if rs != nil {
			rs.Decided(1, "Running", nil)
		}
		rs.End(0, err)
		_ = c
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call with tracing off, want 0", allocs)
	}
}

// The file exporter writes every service's spans to the one file, created
// afresh, and Shutdown flushes them.
func TestFileExporter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spans.json")
	if err := os.WriteFile(path, []byte("an earlier run\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default().Otel
	cfg.Type, cfg.File.Filename = config.OtelFile, path
	e, err := tracing.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{tracing.ServiceExecutor, tracing.ServiceEvents} {
		_, span := e.Provider(svc).Tracer("test").Start(context.Background(), "span of "+svc)
		span.End()
	}
	if e.Provider(tracing.ServiceExecutor) != e.Provider(tracing.ServiceExecutor) {
		t.Fatal("two providers for one service")
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if tracing.Enabled(e.Provider(tracing.ServiceCache)) {
		t.Fatal("a provider made after Shutdown makes spans")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := string(raw)
	for _, want := range []string{`"Name": "span of executor"`, `"Name": "span of events-service"`, `"Value": "events-service"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the file lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "an earlier run") {
		t.Error("the file was not created afresh")
	}
}

// What cannot be set up fails Open with the key to change.
func TestOpenRefuses(t *testing.T) {
	cfg := config.Default().Otel
	cfg.Type = config.OtelJaeger
	if _, err := tracing.Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "otlpgrpc") {
		t.Errorf("jaeger: %v, want the refusal naming OTLP", err)
	}
	cfg.Type, cfg.File.Filename = config.OtelFile, filepath.Join(t.TempDir(), "missing", "spans.json")
	if _, err := tracing.Open(context.Background(), cfg); err == nil || !strings.HasPrefix(err.Error(), "otel.file.filename: ") {
		t.Errorf("unwritable file: %v, want an error naming otel.file.filename", err)
	}
}

// The samplers are Flyte's and parent-based: traceid with ratio 0 keeps no
// trace begun here, but a span whose caller's trace is sampled is kept.
func TestSamplerFollowsTheCaller(t *testing.T) {
	cfg := config.Default().Otel
	cfg.Type, cfg.File.Filename = config.OtelFile, filepath.Join(t.TempDir(), "spans.json")
	cfg.Sampler = config.OtelSamplerConfig{ParentSampler: config.OtelSampleTraceID, TraceIDRatio: 0}
	e, err := tracing.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Shutdown(context.Background()) }()
	tr := e.Provider(tracing.ServiceCache).Tracer("test")
	_, root := tr.Start(context.Background(), "root")
	if root.SpanContext().IsSampled() {
		t.Error("ratio 0 sampled a new trace")
	}
	root.End()
	caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1},
		TraceFlags: trace.FlagsSampled, Remote: true})
	_, child := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), caller), "child")
	if !child.SpanContext().IsSampled() || child.SpanContext().TraceID() != caller.TraceID() {
		t.Error("the span of a sampled caller's trace was dropped or left the trace")
	}
	child.End()
}

// Inside a traced reconcile every API request is counted and is a child
// span whose trace context goes to the API server; outside one (informers,
// leader election) requests pass untouched.
func TestRESTRequests(t *testing.T) {
	var mu sync.Mutex
	var parents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		parents = append(parents, r.Header.Get("traceparent"))
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/gone") {
			w.WriteHeader(http.StatusNotFound)
		}
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	cfg := &rest.Config{Host: srv.URL}
	tracing.InstrumentRESTConfig(cfg, tp)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(ctx context.Context, path string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}

	get(context.Background(), "/api/v1/namespaces/ns/pods") // an informer's list
	ctx, rec := tracing.NewTracer(tp, "test").StartReconcile(context.Background(), "ns", "ta")
	get(ctx, "/api/v1/namespaces/ns/pods/ta-0")
	get(ctx, "/api/v1/namespaces/ns/pods/gone")
	if n := rec.APIRequests(); n != 2 {
		t.Errorf("%d requests counted in the reconcile, want 2", n)
	}
	rec.End(0, nil)

	if parents[0] != "" {
		t.Errorf("a request outside a reconcile carried traceparent %q", parents[0])
	}
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 2 requests and the reconcile: %v", len(spans), spans)
	}
	reconcile := spans[2]
	if reconcile.Name != "taskaction.Reconcile" || attr(reconcile, "k8s.api.requests") != "2" || attr(reconcile, "taskaction.name") != "ta" {
		t.Errorf("reconcile span %s %v", reconcile.Name, reconcile.Attributes)
	}
	for i, s := range spans[:2] {
		if s.Name != "k8s.api GET" || s.Parent.SpanID() != reconcile.SpanContext.SpanID() || s.SpanKind != trace.SpanKindClient {
			t.Errorf("request span %d: %s, parent %s, kind %s", i, s.Name, s.Parent.SpanID(), s.SpanKind)
		}
		if want := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"; parents[i+1] != want {
			t.Errorf("request %d sent traceparent %q, want %q", i, parents[i+1], want)
		}
	}
	if got := attr(spans[1], "http.response.status_code"); got != "404" || spans[1].Status.Code != 0 {
		t.Errorf("a 404 (an answer, not a failure): status code %s, span status %v", got, spans[1].Status)
	}
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// BenchmarkOff is what a reconcile, an event's Record and a cache or
// storage call pay for tracing when it is off: the span calls alone.
func BenchmarkOff(b *testing.B) {
	off := tracing.NewTracer(noop.NewTracerProvider(), "x")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, rs := off.StartReconcile(ctx, "ns", "name")
		c, span := off.Start(c, "cache.Get")
		if span.IsRecording() {
			b.Fatal("recording")
		}
		tracing.End(span, nil)
		rs.End(0, nil)
		_ = c
	}
}
