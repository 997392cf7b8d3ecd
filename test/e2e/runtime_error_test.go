package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
	"github.com/taskaction/executor/pkg/local"
	"github.com/taskaction/executor/pkg/storage"
	"github.com/taskaction/executor/pkg/task"
)

// TestRuntimeErrorFile: Flyte's runtime reports a user error by leaving
// error.pb under the attempt's output prefix and exiting 0. A non-recoverable
// one fails the task at once despite its retries; a recoverable one is
// retried, and the next attempt (without error.pb) succeeds.
func TestRuntimeErrorFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := storage.New(local.StorageConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	bucket := local.BucketURI(dir)
	ev := eventsvctest.Start(t, eventsvctest.Options{})
	ns := namespace(t)
	startExecutorWith(t, ns, ev.URL, "http://127.0.0.1:1", func(c *config.Config) { c.Storage = local.StorageConfig(dir) })

	// failsWith runs action (with retries) until its first pod, which leaves
	// error.pb (kind) and exits 0.
	failsWith := func(action string, retries uint32, kind core.ContainerError_Kind) *flytev1.TaskAction {
		ta := flyteAction(t, ns, "rerr", action, nil, retries)
		ta.Spec.InputURI, ta.Spec.RunOutputBase = bucket+"/proj/dev/rerr/"+action, bucket+"/proj/dev/rerr/"
		create(t, ta)
		pod := waitPod(t, ns, ta.Name+"-0")
		doc := &core.ErrorDocument{Error: &core.ContainerError{Code: "ValueError", Message: "x must be positive",
			Kind: kind, Origin: core.ExecutionError_USER}}
		if err := st.WriteProtobuf(ctx, task.OutputPrefix(get(t, ns, ta.Name), 1)+"/"+storage.ErrorFile, doc); err != nil {
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
