package e2e

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
	"github.com/taskaction/executor/pkg/local"
	"github.com/taskaction/executor/pkg/storage"
	"github.com/taskaction/executor/pkg/storage/layout"
	"github.com/taskaction/executor/pkg/task"
)

// TestRuntimeErrorFile: Flyte's runtime reports a user error by leaving
// error.pb under the attempt's output prefix and exiting 0. A non-recoverable
// one fails the task at once despite its retries; a recoverable one is
// retried, and the next attempt (without error.pb) succeeds.
func TestRuntimeErrorFile(t *testing.T) {
	ctx := context.Background()
	st, bucket, ns := withBucket(t, "http://127.0.0.1:1")

	// failsWith runs action (with retries) until its first pod, which leaves
	// error.pb (kind) and exits 0.
	failsWith := func(action string, retries uint32, kind core.ContainerError_Kind) *flytev1.TaskAction {
		ta := flyteAction(t, ns, "rerr", action, nil, retries)
		ta.Spec.InputURI, ta.Spec.RunOutputBase = bucket+"/proj/dev/rerr/"+action, bucket+"/proj/dev/rerr/"
		create(t, ta)
		pod := waitPod(t, ns, ta.Name+"-0")
		doc := &core.ErrorDocument{Error: &core.ContainerError{Code: "ValueError", Message: "x must be positive",
			Kind: kind, Origin: core.ExecutionError_USER}}
		if err := st.WriteProtobuf(ctx, task.OutputPrefix(get(t, ns, ta.Name), 1)+"/"+layout.ErrorFile, doc); err != nil {
			t.Fatal(err)
		}
		kubelet(t, pod, corev1.PodSucceeded, 0)
		return ta
	}

	fatal := failsWith("fatal", 2, core.ContainerError_NON_RECOVERABLE)
	got := waitReason(t, ns, fatal.Name, flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	if got.Status.Attempts != 1 || got.Status.ErrorState == nil || got.Status.ErrorState.Code != "ValueError" ||
		got.Status.ErrorState.Kind != flytev1.ErrorKindUser {
		t.Fatalf("non-recoverable: attempts %d, errorState %+v; want one attempt failed with the runtime's USER error", got.Status.Attempts, got.Status.ErrorState)
	}

	flaky := failsWith("flaky", 1, core.ContainerError_RECOVERABLE)
	kubelet(t, waitPod(t, ns, flaky.Name+"-1"), corev1.PodSucceeded, 0)
	got = waitReason(t, ns, flaky.Name, flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 2 {
		t.Fatalf("recoverable: attempts %d, want 2 (retried, then succeeded)", got.Status.Attempts)
	}
}

// TestMissingOutputs: a Flyte-form task whose interface declares an output
// and whose pod succeeds without writing outputs.pb (nor error.pb) fails that
// attempt with OutputsNotFound, recoverable as in Flyte: it is retried, and
// the attempt that writes its outputs succeeds.
func TestMissingOutputs(t *testing.T) {
	ctx := context.Background()
	st, bucket, ns := withBucket(t, "http://127.0.0.1:1")

	ta := flyteAction(t, ns, "outs", "square", nil, 1)
	ta.Spec.InputURI, ta.Spec.RunOutputBase = bucket+"/proj/dev/outs/square", bucket+"/proj/dev/outs/"
	editTemplate(t, ta, func(tmpl *core.TaskTemplate) {
		tmpl.Interface = &core.TypedInterface{Outputs: &core.VariableMap{Variables: []*core.VariableEntry{
			{Key: "o0", Value: &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}}}}}}
	})
	create(t, ta)

	// Attempt 1 exits 0 and writes nothing.
	kubelet(t, waitPod(t, ns, ta.Name+"-0"), corev1.PodSucceeded, 0)
	// Attempt 2 writes its outputs, then exits 0.
	pod := waitPod(t, ns, ta.Name+"-1")
	out := &core.LiteralMap{Literals: map[string]*core.Literal{"o0": {Value: &core.Literal_Scalar{Scalar: &core.Scalar{
		Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: 4}}}}}}}}
	if err := st.WriteProtobuf(ctx, task.OutputURI(get(t, ns, ta.Name), 2), out); err != nil {
		t.Fatal(err)
	}
	kubelet(t, pod, corev1.PodSucceeded, 0)
	got := waitReason(t, ns, ta.Name, flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 2 {
		t.Fatalf("attempts %d, want 2 (the first without outputs retried)", got.Status.Attempts)
	}
	retried := false
	for _, h := range got.Status.PhaseHistory {
		if strings.Contains(h.Message, "wrote no outputs") {
			retried = true
		}
	}
	if !retried {
		t.Errorf("phaseHistory %+v: no entry says the first attempt wrote no outputs", got.Status.PhaseHistory)
	}
}

// TestInputsRenderedIntoTheCommand: a Flyte-form task whose args hold
// {{.Inputs.x}} gets a pod whose args hold the value of x, read from the
// inputs file in blob storage at launch.
func TestInputsRenderedIntoTheCommand(t *testing.T) {
	ctx := context.Background()
	st, bucket, ns := withBucket(t, "http://127.0.0.1:1")

	ta := flyteAction(t, ns, "ins", "echo", nil, 0)
	ta.Spec.InputURI, ta.Spec.RunOutputBase = bucket+"/proj/dev/ins/echo", bucket+"/proj/dev/ins/"
	editTemplate(t, ta, func(tmpl *core.TaskTemplate) {
		tmpl.GetContainer().Args = []string{"--x", "{{.Inputs.x}}", "--run-name", "{{.runName}}"}
	})
	in := &core.LiteralMap{Literals: map[string]*core.Literal{"x": {Value: &core.Literal_Scalar{Scalar: &core.Scalar{
		Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: 42}}}}}}}}
	if err := st.WriteProtobuf(ctx, ta.Spec.InputURI+"/inputs.pb", in); err != nil {
		t.Fatal(err)
	}
	create(t, ta)
	pod := waitPod(t, ns, ta.Name+"-0")
	var args []string
	for _, c := range pod.Spec.Containers {
		if c.Name == pod.Annotations["primary_container_name"] || len(pod.Spec.Containers) == 1 {
			args = c.Args
		}
	}
	if strings.Join(args, " ") != "--x 42 --run-name {{.runName}}" {
		t.Errorf("args %q, want the input's value rendered and {{.runName}} left for the runtime", args)
	}
}

// withBucket starts an events service and the executor on a new namespace
// with a file:// bucket as its blob storage (cacheURL: its cache service), and
// returns the bucket's store, its URI and the namespace.
func withBucket(t *testing.T, cacheURL string) (*storage.Store, string, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := storage.New(local.StorageConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ev := eventsvctest.Start(t, eventsvctest.Options{})
	ns := namespace(t)
	startExecutorWith(t, ns, ev.URL, cacheURL, func(c *config.Config) { c.Storage = local.StorageConfig(dir) })
	return st, local.BucketURI(dir), ns
}

// editTemplate changes the serialized core.TaskTemplate of a Flyte-form ta.
func editTemplate(t *testing.T, ta *flytev1.TaskAction, edit func(*core.TaskTemplate)) {
	t.Helper()
	tmpl := &core.TaskTemplate{}
	if err := proto.Unmarshal(ta.Spec.TaskTemplate, tmpl); err != nil {
		t.Fatal(err)
	}
	edit(tmpl)
	b, err := proto.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	ta.Spec.TaskTemplate = b
}
