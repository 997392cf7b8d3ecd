package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/storage"
	"github.com/taskaction/executor/pkg/task"
)

// errorDocStore is blob storage holding one error.pb (none when doc is nil)
// and no outputs.
type errorDocStore struct{ doc *storage.TaskError }

func (s errorDocStore) ReadInputs(context.Context, string) (*core.LiteralMap, error) {
	return &core.LiteralMap{}, nil
}

func (s errorDocStore) ReadTaskError(context.Context, string) (storage.TaskError, error) {
	if s.doc == nil {
		return storage.TaskError{Code: storage.CodeErrorFileNotFound, Kind: core.ExecutionError_SYSTEM, Recoverable: true}, nil
	}
	return *s.doc, nil
}

func (s errorDocStore) OutputsExist(context.Context, string) (bool, error) { return false, nil }

// podWithSidecar is the attempt's pod, still Running: its primary container
// "task" exited 0 at t0+30s while the sidecar "side" runs on.
func podWithSidecar() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hello-0", UID: "pod-1",
			Annotations: map[string]string{container.AnnotationPrimaryContainer: "task"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "task"}, {Name: "side"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "task", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: metav1.NewTime(t0), FinishedAt: metav1.NewTime(t0.Add(30 * time.Second))}}},
			{Name: "side", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
		}},
	}
}

// A Flyte-form task's primary container ends (exit 0: Flyte's runtime exits
// 0 after a user error) while a sidecar keeps the pod Running. The task is
// over, as in Flyte's pod plugin: the runtime's error.pb is read exactly as
// for an ended pod, so a user error written there fails the task instead of
// being reported SUCCEEDED, and the pod, which would otherwise run on with
// its sidecar, is stopped. Without error.pb the task succeeds and the pod is
// stopped as well.
func TestPrimaryEndedBesideRunningSidecar(t *testing.T) {
	now := t0.Add(time.Minute)
	flyteTask := &task.Task{Form: task.FormFlyte}
	userErr := &storage.TaskError{Code: "ValueError", Message: "bad input", Kind: core.ExecutionError_USER}
	for _, tc := range []struct {
		name       string
		doc        *storage.TaskError
		wantEvent  string
		wantCode   string
		wantReason string
	}{
		{"error.pb says USER, non-recoverable", userErr, "1:FAILED", "ValueError", "PermanentFailure"},
		{"no error.pb", nil, "1:SUCCEEDED", "", "Completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := runningTA(t, newTA(0))
			obs := container.ObservePod(podWithSidecar(), now, plugin.Settings{})
			pod := ours("pod-1", t0, obs)
			pod.Name = "hello-0"
			r := &Reconciler{Storage: errorDocStore{doc: tc.doc}}
			re, err := r.readRuntimeError(context.Background(), ta, flyteTask, pod, 1)
			if err != nil {
				t.Fatal(err)
			}
			if re == nil {
				t.Fatalf("error.pb was not read for a task whose primary container ended (observation %+v)", obs)
			}
			w := worldOf(t, ta, pod)
			w.RuntimeError = re
			p := testDecider.decide(w, now)
			if got := evs(p.Events); !strings.HasPrefix(got, tc.wantEvent+":") {
				t.Errorf("events = %s, want %s", got, tc.wantEvent)
			}
			var code string
			if p.Status.ErrorState != nil {
				code = p.Status.ErrorState.Code
			}
			if code != tc.wantCode {
				t.Errorf("error code = %q, want %q", code, tc.wantCode)
			}
			if got := history(p.Status); !strings.HasSuffix(got, tc.wantReason) {
				t.Errorf("history = %s, want it to end with %s", got, tc.wantReason)
			}
			if len(p.Delete) != 1 || p.Delete[0].UID != "pod-1" {
				t.Errorf("deletes = %+v, want the pod (its sidecar runs on)", p.Delete)
			}
			// Once ended, later reconciles keep stopping it until it goes.
			after := applied(ta, p)
			p2 := testDecider.decide(worldOf(t, after, pod), now.Add(time.Second))
			if len(p2.Delete) != 1 || p2.Delete[0].UID != "pod-1" {
				t.Errorf("terminal reconcile: deletes = %+v, want the pod", p2.Delete)
			}
		})
	}
}
