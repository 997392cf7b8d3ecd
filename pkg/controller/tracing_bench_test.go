package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/tracing"
)

// BenchmarkReconcileTracing is what tracing adds to the most frequent
// reconcile, one that finds a running pod and changes nothing (a resync, a
// pod update that matters not): off (otel.type noop, the default: the no-op
// provider), on with every trace sampled out, and on with every span kept.
// Off must cost what the reconcile cost before tracing (the same
// allocations; pkg/tracing's TestOffAllocatesNothing holds the wrapper to 0).
func BenchmarkReconcileTracing(b *testing.B) {
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"noop", noop.NewTracerProvider()},
		{"sampled-out", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))},
		{"recorded", sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r, req := steadyReconciler(b, tc.tp)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Reconcile(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// steadyReconciler is a reconciler over a fake API server holding a
// TaskAction whose pod runs and whose status says so: each reconcile reads
// both and writes nothing.
func steadyReconciler(b *testing.B, tp trace.TracerProvider) (*Reconciler, ctrl.Request) {
	b.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		b.Fatal(err)
	}
	if err := flytev1.AddToScheme(s); err != nil {
		b.Fatal(err)
	}
	store := fake.NewClientBuilder().WithScheme(s).
		WithStatusSubresource(&flytev1.TaskAction{}, &corev1.Pod{}).
		WithIndex(&corev1.Pod{}, ownerIndex, controllerUID).
		WithIndex(&flytev1.TaskAction{}, identityIndex, actionIdentity).
		Build()
	clk := clocktesting.NewFakeClock(t0)
	reg := plugin.NewRegistry()
	reg.SetDefault(container.New())
	uids := 0
	// UIDs and creation times as the API server sets them.
	c := interceptor.NewClient(store, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			uids++
			obj.SetUID(types.UID(fmt.Sprintf("uid-%d", uids)))
			obj.SetCreationTimestamp(metav1.NewTime(clk.Now()))
			return c.Create(ctx, obj, opts...)
		},
	})
	r := &Reconciler{Client: c, APIReader: store, Registry: reg, Recorder: &events.MemoryRecorder{}, Clock: clk,
		Options: Options{Cluster: "c1", MaxSystemFailures: 3, RequeueDuration: 10 * time.Second},
		Tracer:  tracing.NewTracer(tp, "bench"),
		memory:  newProcessMemory()}
	ta := newTA(0)
	ta.Finalizers = nil
	ctx := context.Background()
	if err := c.Create(ctx, ta); err != nil {
		b.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ta.Namespace, Name: ta.Name}}
	reconcile := func() {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	reconcile() // launch
	pod := &corev1.Pod{}
	if err := store.Get(ctx, types.NamespacedName{Namespace: ta.Namespace, Name: ta.Name + "-0"}, pod); err != nil {
		b.Fatalf("no pod after the launch: %v", err)
	}
	now := metav1.NewTime(clk.Now())
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now, ContainerStatuses: []corev1.ContainerStatus{{
		Name: pod.Spec.Containers[0].Name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}}
	if err := store.Status().Update(ctx, pod); err != nil {
		b.Fatal(err)
	}
	for range 3 {
		reconcile() // Running recorded
	}
	before := &flytev1.TaskAction{}
	_ = store.Get(ctx, req.NamespacedName, before)
	reconcile()
	after := &flytev1.TaskAction{}
	_ = store.Get(ctx, req.NamespacedName, after)
	if before.ResourceVersion != after.ResourceVersion || after.Status.PluginPhase != string(plugin.PhaseRunning) {
		b.Fatalf("not steady: resourceVersion %s then %s, phase %q", before.ResourceVersion, after.ResourceVersion, after.Status.PluginPhase)
	}
	return r, req
}
