package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/cachesvc/cachesvctest"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
	"github.com/taskaction/executor/pkg/local"
	"github.com/taskaction/executor/pkg/setup"
	"github.com/taskaction/executor/pkg/storage"
	"github.com/taskaction/executor/pkg/storage/layout"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tracing"
)

// One cached Flyte-form TaskAction's life (launch, running, success), traced
// by the executor and the real events and cache services into one in-memory
// exporter, each with its own provider (no global one): every reconcile is a
// span with the TaskAction, the attempt, the phase decided and the API
// requests it made (each a child span); each event's Record span leads to
// the batch's RPC, whose client span the events service continues with a
// server span in the same trace; the cache's Get and Put likewise at the
// cache service; the reads of blob storage are spans of their reconciles.
func TestTracingFollowsATaskAction(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	provider := func(service string) trace.TracerProvider {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return tp
	}
	dir := t.TempDir()
	st, err := storage.New(local.StorageConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	ev := eventsvctest.Start(t, eventsvctest.Options{TracerProvider: provider(tracing.ServiceEvents)})
	cs := cachesvctest.Start(t, cachesvctest.Options{TracerProvider: provider(tracing.ServiceCache)})
	ns := namespace(t)
	startTracedExecutor(t, ns, ev.URL, cs.URL, provider(tracing.ServiceExecutor), func(c *config.Config) { c.Storage = local.StorageConfig(dir) })

	ta := tracedTaskAction(t, st, local.BucketURI(dir), ns)
	create(t, ta)
	pod := waitPod(t, ns, ta.Name+"-0")
	waitReason(t, ns, ta.Name, flytev1.ConditionProgressing, flytev1.ReasonQueued)
	kubelet(t, pod, corev1.PodRunning, 0)
	waitReason(t, ns, ta.Name, flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	// The task's outputs, which its interface declares: the success checks them.
	if err := st.WriteProtobuf(context.Background(), task.OutputURI(ta, 1), intInputs(4)); err != nil {
		t.Fatal(err)
	}
	kubelet(t, pod, corev1.PodSucceeded, 0)
	if got := waitReason(t, ns, ta.Name, flytev1.ConditionSucceeded, flytev1.ReasonCompleted); got.Status.CacheStatus != flytev1.CachePopulated {
		t.Fatalf("cacheStatus %q, want POPULATED", got.Status.CacheStatus)
	}

	// The reconcile that decided the success ends after its writes.
	var tr spanTree
	eventually(t, 30*time.Second, "the span of the reconcile that decided Succeeded", func() bool {
		tr = newSpanTree(exp.GetSpans())
		for _, r := range tr.reconciles(ns, ta.Name) {
			if tr.attr(r, "taskaction.phase") == "Succeeded" {
				return true
			}
		}
		return false
	})
	reconciles := tr.reconciles(ns, ta.Name)
	t.Logf("the spans of %s/%s:\n%s", ns, ta.Name, tr.render(reconciles))

	// Every reconcile: its attributes, and one child span per API request it counted.
	var phases []string
	launched := false
	for _, r := range reconciles {
		if p := tr.attr(r, "taskaction.phase"); p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
			phases = append(phases, p)
			if a := tr.attr(r, "taskaction.attempt"); a != "1" {
				t.Errorf("reconcile deciding %s: attempt %q, want 1", p, a)
			}
		}
		n, err := strconv.Atoi(tr.attr(r, "k8s.api.requests"))
		if err != nil {
			t.Fatalf("reconcile %s: no k8s.api.requests: %v", r.SpanContext.SpanID(), err)
		}
		var requests []string
		tr.walk(r, func(s tracetest.SpanStub) {
			if strings.HasPrefix(s.Name, "k8s.api ") {
				requests = append(requests, s.Name)
			}
		})
		if len(requests) != n {
			t.Errorf("reconcile %s counted %d API requests, has %d request spans %v", r.SpanContext.SpanID(), n, len(requests), requests)
		}
		launched = launched || slices.Contains(requests, "k8s.api POST")
	}
	if !slices.Equal(phases, []string{"Queued", "Running", "Succeeded"}) {
		t.Errorf("phases decided, in order: %v; want Queued, Running, Succeeded", phases)
	}
	if !launched {
		t.Error("no reconcile has the pod's create (k8s.api POST) as a child span")
	}

	// Each event's Record span reaches the events service in its trace.
	var reported []string
	for _, r := range reconciles {
		for _, rec := range tr.children(r, "events.Record") {
			reported = append(reported, tr.attr(rec, "event.phase"))
			batch, ok := tr.child(rec, "events.RecordBatch")
			if !ok {
				// Its event went out in another caller's batch: linked to it.
				t.Errorf("events.Record %s has no batch span as a child (one TaskAction alone: its batches are its own)", tr.attr(rec, "event.phase"))
				continue
			}
			tr.checkRPC(t, batch, "flyteidl2.workflow.EventsProxyService/Record", tracing.ServiceEvents)
		}
	}
	if !slices.Equal(reported, []string{"QUEUED", "RUNNING", "SUCCEEDED"}) {
		t.Errorf("events recorded, in order: %v; want QUEUED, RUNNING, SUCCEEDED", reported)
	}

	// The cache: a miss at launch, the outputs stored at the success, each at the service.
	found := map[string]bool{}
	for _, r := range reconciles {
		tr.walk(r, func(s tracetest.SpanStub) {
			switch s.Name {
			case "cache.Get", "cache.Put":
				found[s.Name] = true
				tr.checkRPC(t, s, "flyteidl2.cacheservice.v2.CacheService/"+strings.TrimPrefix(s.Name, "cache."), tracing.ServiceCache)
				if s.Name == "cache.Get" && tr.attr(s, "cache.hit") != "false" {
					t.Errorf("cache.Get: hit %q, want false", tr.attr(s, "cache.hit"))
				}
			case "storage.ReadInputs", "storage.ReadTaskError", "storage.OutputsExist":
				found[s.Name] = true
				if !strings.HasPrefix(tr.attr(s, "storage.uri"), "file://") {
					t.Errorf("%s: storage.uri %q", s.Name, tr.attr(s, "storage.uri"))
				}
			}
		})
	}
	for _, name := range []string{"cache.Get", "cache.Put", "storage.ReadInputs", "storage.ReadTaskError", "storage.OutputsExist"} {
		if !found[name] {
			t.Errorf("no %s span under the TaskAction's reconciles", name)
		}
	}
}

// startTracedExecutor is startExecutorWith with the executor's spans going
// to tp (setup.Options.TracerProvider: no global provider).
func startTracedExecutor(t *testing.T, ns, eventsURL, cacheURL string, tp trace.TracerProvider, mutate func(*config.Config)) {
	t.Helper()
	c := config.Default()
	c.MetricsBindAddress, c.HealthProbeBindAddress = "0", "0"
	c.EventsServiceURL, c.CacheServiceURL = eventsURL, cacheURL
	c.RequeueDuration = config.Duration{Duration: requeue}
	c.GC.Interval = config.Duration{}
	c.Cluster = "e2e"
	c.QueuedStatusDelay = config.Duration{}
	mutate(&c)
	mgr, err := setup.Setup(c, env.Config, setup.Options{Namespaces: []string{ns}, SkipNameValidation: true, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// tracedTaskAction is a cached Flyte-form task (discoverableTemplate) that
// also declares an output, with its inputs stored.
func tracedTaskAction(t *testing.T, st *storage.Store, bucket, ns string) *flytev1.TaskAction {
	t.Helper()
	tmpl := discoverableTemplate()
	tmpl.Id.Name = "wf.traced"
	tmpl.Interface.Outputs = &core.VariableMap{Variables: []*core.VariableEntry{
		{Key: "o0", Value: &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}}}}}
	b, err := proto.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	run, action := "rtrace", "a0"
	inputURI := bucket + "/proj/dev/" + run + "/" + action
	if err := st.WriteProtobuf(context.Background(), inputURI+"/"+layout.InputsFile, intInputs(2)); err != nil {
		t.Fatal(err)
	}
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: run + "-" + action, Namespace: ns},
		Spec: flytev1.TaskActionSpec{
			RunName: run, Project: "proj", Domain: "dev", ActionName: action, TaskType: "python", ShortName: "traced",
			InputURI: inputURI, RunOutputBase: bucket + "/proj/dev/" + run + "/", CacheKey: "cache-v1", TaskTemplate: b,
		},
	}
}

// spanTree indexes the exported spans by parent.
type spanTree struct {
	spans []tracetest.SpanStub
	kids  map[trace.SpanID][]tracetest.SpanStub
}

func newSpanTree(spans []tracetest.SpanStub) spanTree {
	// In the order they started: a parent's children, and the reconciles, in time.
	slices.SortStableFunc(spans, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	t := spanTree{spans: spans, kids: map[trace.SpanID][]tracetest.SpanStub{}}
	for _, s := range spans {
		if s.Parent.IsValid() {
			t.kids[s.Parent.SpanID()] = append(t.kids[s.Parent.SpanID()], s)
		}
	}
	return t
}

func (t spanTree) attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

func (t spanTree) reconciles(ns, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range t.spans {
		if s.Name == "taskaction.Reconcile" && t.attr(s, "taskaction.namespace") == ns && t.attr(s, "taskaction.name") == name {
			out = append(out, s)
		}
	}
	return out
}

func (t spanTree) children(s tracetest.SpanStub, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, c := range t.kids[s.SpanContext.SpanID()] {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

func (t spanTree) child(s tracetest.SpanStub, name string) (tracetest.SpanStub, bool) {
	cs := t.children(s, name)
	if len(cs) != 1 {
		return tracetest.SpanStub{}, false
	}
	return cs[0], true
}

// walk visits s's descendants, depth first.
func (t spanTree) walk(s tracetest.SpanStub, visit func(tracetest.SpanStub)) {
	for _, c := range t.kids[s.SpanContext.SpanID()] {
		visit(c)
		t.walk(c, visit)
	}
}

// checkRPC: s has one client span of procedure, whose child is the server
// span of service, in s's trace.
func (t spanTree) checkRPC(tb testing.TB, s tracetest.SpanStub, procedure, service string) {
	tb.Helper()
	client, ok := t.child(s, procedure)
	if !ok || client.SpanKind != trace.SpanKindClient {
		tb.Errorf("%s: no client span %s as its child", s.Name, procedure)
		return
	}
	server, ok := t.child(client, procedure)
	if !ok || server.SpanKind != trace.SpanKindServer || server.SpanContext.TraceID() != s.SpanContext.TraceID() {
		tb.Errorf("%s: the client span %s has no server span in its trace", s.Name, procedure)
		return
	}
	if v, _ := server.Resource.Set().Value("service.name"); v.AsString() != service {
		tb.Errorf("%s: the server span is %q's, want %q's", s.Name, v.AsString(), service)
	}
}

// render draws the spans under roots, one per line: name, service when not
// the executor, and the attributes that tell a reconcile apart.
func (t spanTree) render(roots []tracetest.SpanStub) string {
	var b strings.Builder
	var draw func(s tracetest.SpanStub, depth int)
	draw = func(s tracetest.SpanStub, depth int) {
		line := strings.Repeat("  ", depth) + s.Name
		if v, _ := s.Resource.Set().Value("service.name"); v.AsString() != tracing.ServiceExecutor {
			line += " [" + v.AsString() + "]"
		}
		for _, k := range []string{"taskaction.phase", "taskaction.events", "k8s.api.requests", "event.phase", "cache.hit"} {
			if v := t.attr(s, k); v != "" {
				line += fmt.Sprintf(" %s=%s", k, v)
			}
		}
		b.WriteString(line + "\n")
		for _, c := range t.kids[s.SpanContext.SpanID()] {
			draw(c, depth+1)
		}
	}
	for _, r := range roots {
		draw(r, 0)
	}
	return b.String()
}
