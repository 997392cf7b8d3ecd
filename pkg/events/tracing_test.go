package events_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
	"github.com/taskaction/executor/pkg/tracing"
)

// Two callers' events go out in one batch: the batch's span is a child of
// one caller's Record span (a sampled one when the other's trace is not
// kept) and links the other's, which links back; the RPC's client span is
// its child and the events service continues the trace with a server span.
func TestBatchSpanJoinsTheCallersTraces(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	provider := func(service string) *sdktrace.TracerProvider {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return tp
	}
	executor := provider(tracing.ServiceExecutor)
	srv := eventsvctest.Start(t, eventsvctest.Options{TracerProvider: provider(tracing.ServiceEvents)})
	// A batch goes out only once two events are in it: no timing decides.
	b := events.NewBatcher(events.NewClient(srv.URL, nil, tracing.ClientOptions(executor)...),
		events.BatcherOptions{MaxBatch: 2, MaxDelay: time.Hour, MaxIdle: -1, TracerProvider: executor})
	startBatcher(t, b)

	for _, tc := range []struct {
		name           string
		sampledA       bool
		parentMustBeB  bool
		exportedRecord int
	}{
		{name: "both sampled", sampledA: true, exportedRecord: 2},
		{name: "only the second caller's trace is kept", sampledA: false, parentMustBeB: true, exportedRecord: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp.Reset()
			// A's reconcile: a trace begun elsewhere, kept or not.
			flags := trace.TraceFlags(0)
			if tc.sampledA {
				flags = trace.FlagsSampled
			}
			ctxA := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{0xa}, SpanID: trace.SpanID{0xa}, TraceFlags: flags, Remote: true}))
			ctxB, reconcileB := executor.Tracer("test").Start(context.Background(), "reconcile B")
			var wg sync.WaitGroup
			for i, ctx := range []context.Context{ctxA, ctxB} {
				wg.Go(func() {
					if err := b.Record(ctx, event("traced-"+tc.name, i)); err != nil {
						t.Errorf("record %d: %v", i, err)
					}
				})
			}
			wg.Wait()
			reconcileB.End()

			spans := exp.GetSpans()
			byName := map[string][]tracetest.SpanStub{}
			for _, s := range spans {
				byName[s.Name] = append(byName[s.Name], s)
			}
			records, batches := byName["events.Record"], byName["events.RecordBatch"]
			const rpc = "flyteidl2.workflow.EventsProxyService/Record"
			if len(records) != tc.exportedRecord || len(batches) != 1 || len(byName[rpc]) != 2 {
				t.Fatalf("spans: %d events.Record (want %d), %d events.RecordBatch (want 1), %d %s (want a client and a server span)",
					len(records), tc.exportedRecord, len(batches), len(byName[rpc]), rpc)
			}
			batch := batches[0]
			var parent, other tracetest.SpanStub
			for _, r := range records {
				if r.SpanContext.SpanID() == batch.Parent.SpanID() {
					parent = r
				} else {
					other = r
				}
			}
			if !parent.SpanContext.IsValid() {
				t.Fatalf("the batch's parent %s is no caller's Record span", batch.Parent.SpanID())
			}
			if tc.parentMustBeB && parent.Parent.SpanID() != reconcileB.SpanContext().SpanID() {
				t.Errorf("the batch's parent is not the sampled caller's Record span")
			}
			if attr(batch, "events.count") != "2" || len(batch.Links) != 1 {
				t.Errorf("batch span: attributes %v, links %v; want events.count 2 and one link", batch.Attributes, batch.Links)
			}
			if tc.sampledA {
				if batch.Links[0].SpanContext.SpanID() != other.SpanContext.SpanID() {
					t.Errorf("the batch links %s, not the other caller's Record span %s", batch.Links[0].SpanContext.SpanID(), other.SpanContext.SpanID())
				}
				if len(other.Links) != 1 || other.Links[0].SpanContext.SpanID() != batch.SpanContext.SpanID() {
					t.Errorf("the other caller's Record span does not link to the batch: %v", other.Links)
				}
			}
			var client, server tracetest.SpanStub
			for _, s := range byName[rpc] {
				switch s.SpanKind {
				case trace.SpanKindClient:
					client = s
				case trace.SpanKindServer:
					server = s
				}
			}
			if client.Parent.SpanID() != batch.SpanContext.SpanID() || server.Parent.SpanID() != client.SpanContext.SpanID() ||
				server.SpanContext.TraceID() != parent.SpanContext.TraceID() {
				t.Errorf("RPC spans: client's parent %s (batch %s), server's parent %s (client %s), server's trace %s (caller's %s)",
					client.Parent.SpanID(), batch.SpanContext.SpanID(), server.Parent.SpanID(), client.SpanContext.SpanID(),
					server.SpanContext.TraceID(), parent.SpanContext.TraceID())
			}
			if svc := resourceService(server); svc != tracing.ServiceEvents {
				t.Errorf("server span of service %q, want %q", svc, tracing.ServiceEvents)
			}
		})
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

func resourceService(s tracetest.SpanStub) string {
	v, _ := s.Resource.Set().Value("service.name")
	return v.AsString()
}
