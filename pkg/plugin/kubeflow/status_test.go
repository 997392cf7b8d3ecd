package kubeflow

import (
	"strings"
	"testing"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

func cond(typ kubeflowv1.JobConditionType, status corev1.ConditionStatus, at time.Time, reason, msg string) kubeflowv1.JobCondition {
	return kubeflowv1.JobCondition{Type: typ, Status: status, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(at), LastUpdateTime: metav1.NewTime(at)}
}

// TestObserveJob: the conditions of a job map to the attempt's phase as
// Flyte's plugins map them (the facts Flyte's plugin reported for the same
// statuses are noted where they differ), with when the phase began and
// whether the job ended by itself.
func TestObserveJob(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(2*time.Second), t0.Add(4*time.Second)
	start := metav1.NewTime(t0)
	done := metav1.NewTime(t2)
	created := cond(kubeflowv1.JobCreated, corev1.ConditionTrue, t0, "PyTorchJobCreated", "created")
	timeout := time.Minute
	for _, tc := range []struct {
		name     string
		created  time.Time
		now      time.Time
		deleting bool
		status   kubeflowv1.JobStatus
		phase    plugin.Phase
		at       time.Time
		finished bool
		code     string
		kind     flytev1.ErrorKind
		message  string
		recheck  time.Duration
	}{
		{name: "untouched: queued, rechecked at the timeout", created: t0, now: t0.Add(20 * time.Second),
			phase: plugin.PhaseQueued, recheck: 40 * time.Second},
		{name: "untouched past the timeout: a system failure (Flyte: an error on every reconcile)", created: t0, now: t0.Add(61 * time.Second),
			phase: plugin.PhaseRetryableFailure, code: CodeOperatorTimeout, kind: flytev1.ErrorKindSystem, message: "within 1m0s"},
		{name: "created", created: t0, now: t2, status: kubeflowv1.JobStatus{StartTime: &start, Conditions: []kubeflowv1.JobCondition{created}},
			phase: plugin.PhaseQueued, at: t0, message: "job created"},
		{name: "created long ago, started: not a timeout", created: t0, now: t0.Add(time.Hour), status: kubeflowv1.JobStatus{StartTime: &start, Conditions: []kubeflowv1.JobCondition{created}},
			phase: plugin.PhaseQueued, at: t0},
		{name: "running", created: t0, now: t2, status: kubeflowv1.JobStatus{StartTime: &start, Conditions: []kubeflowv1.JobCondition{
			created, cond(kubeflowv1.JobRunning, corev1.ConditionTrue, t1, "PyTorchJobRunning", "running")}},
			phase: plugin.PhaseRunning, at: t1},
		{name: "running in the second of its creation: the later condition (Flyte: queued)", created: t0, now: t2, status: kubeflowv1.JobStatus{StartTime: &start, Conditions: []kubeflowv1.JobCondition{
			created, cond(kubeflowv1.JobRunning, corev1.ConditionTrue, t0, "PyTorchJobRunning", "running")}},
			phase: plugin.PhaseRunning, at: t0},
		{name: "restarting is running", created: t0, now: t2, status: kubeflowv1.JobStatus{StartTime: &start, Conditions: []kubeflowv1.JobCondition{
			created, cond(kubeflowv1.JobRunning, corev1.ConditionFalse, t1, "PyTorchJobRunning", "running"),
			cond(kubeflowv1.JobRestarting, corev1.ConditionTrue, t2, "PyTorchJobRestarting", "worker-0 restarted")}},
			phase: plugin.PhaseRunning, at: t2, message: "job restarting: PyTorchJobRestarting: worker-0 restarted"},
		{name: "succeeded: ended by itself", created: t0, now: t2.Add(time.Minute), status: kubeflowv1.JobStatus{StartTime: &start, CompletionTime: &done, Conditions: []kubeflowv1.JobCondition{
			created, cond(kubeflowv1.JobRunning, corev1.ConditionFalse, t2, "PyTorchJobRunning", "running"),
			cond(kubeflowv1.JobSucceeded, corev1.ConditionTrue, t2, "PyTorchJobSucceeded", "done")}},
			phase: plugin.PhaseSucceeded, at: t2, finished: true},
		{name: "failed: a retryable user failure, Flyte's code and message", created: t0, now: t2.Add(time.Minute), status: kubeflowv1.JobStatus{StartTime: &start, CompletionTime: &done, Conditions: []kubeflowv1.JobCondition{
			created, cond(kubeflowv1.JobRunning, corev1.ConditionFalse, t2, "PyTorchJobRunning", "running"),
			cond(kubeflowv1.JobFailed, corev1.ConditionTrue, t2, "PyTorchJobFailed", "job rkf12ab-a0-0 is failed because 1 Worker replica(s) failed")}},
			phase: plugin.PhaseRetryableFailure, at: t2, finished: true, code: CodeJobFailed, kind: flytev1.ErrorKindUser,
			message: "Job failed:\n\tPyTorchJobFailed - job rkf12ab-a0-0 is failed because 1 Worker replica(s) failed"},
		{name: "suspended (start time cleared): queued, never a timeout (Flyte: undefined)", created: t0, now: t0.Add(time.Hour), status: kubeflowv1.JobStatus{Conditions: []kubeflowv1.JobCondition{
			created, cond(kubeflowv1.JobSuspended, corev1.ConditionTrue, t1, "PyTorchJobSuspended", "suspended by kueue")}},
			phase: plugin.PhaseQueued, at: t1, message: "job suspended"},
		{name: "no condition true: queued (Flyte: an error on every reconcile)", created: t0, now: t2, status: kubeflowv1.JobStatus{StartTime: &start, Conditions: []kubeflowv1.JobCondition{
			cond(kubeflowv1.JobCreated, corev1.ConditionFalse, t0, "", "")}},
			phase: plugin.PhaseQueued},
		{name: "running and being deleted: deleted by someone else", created: t0, now: t2, deleting: true, status: kubeflowv1.JobStatus{StartTime: &start, Conditions: []kubeflowv1.JobCondition{
			created, cond(kubeflowv1.JobRunning, corev1.ConditionTrue, t1, "", "")}},
			phase: plugin.PhaseRetryableFailure, code: plugin.CodeResourceDeletedExternally, kind: flytev1.ErrorKindSystem, message: "being deleted"},
		{name: "succeeded and being deleted: the success stands", created: t0, now: t2, deleting: true, status: kubeflowv1.JobStatus{StartTime: &start, Conditions: []kubeflowv1.JobCondition{
			created, cond(kubeflowv1.JobSucceeded, corev1.ConditionTrue, t2, "", "")}},
			phase: plugin.PhaseSucceeded, at: t2, finished: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := observeJob(jobState{kind: "PyTorchJob", namespace: "ns", name: "job-0", created: tc.created, deleting: tc.deleting, status: tc.status}, tc.now, timeout)
			if obs.Phase != tc.phase || obs.Finished != tc.finished || !obs.OccurredAt.Equal(tc.at) || obs.RecheckAfter != tc.recheck {
				t.Errorf("phase %s finished %v at %v recheck %v; want %s %v %v %v", obs.Phase, obs.Finished, obs.OccurredAt, obs.RecheckAfter,
					tc.phase, tc.finished, tc.at, tc.recheck)
			}
			if tc.code == "" {
				if obs.Error != nil {
					t.Errorf("error %+v; want none", obs.Error)
				}
			} else if obs.Error == nil || obs.Error.Code != tc.code || obs.Error.Kind != tc.kind {
				t.Errorf("error %+v; want code %s kind %s", obs.Error, tc.code, tc.kind)
			}
			if !strings.Contains(obs.Message, tc.message) {
				t.Errorf("message %q; want it to contain %q", obs.Message, tc.message)
			}
			if obs.Deleting != tc.deleting {
				t.Errorf("deleting %v; want %v", obs.Deleting, tc.deleting)
			}
		})
	}
}

// TestObserveJobBoundsMessages: the operator's words are cut to a bound.
func TestObserveJobBoundsMessages(t *testing.T) {
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 10*maxMessage)
	obs := observeJob(jobState{kind: "TFJob", status: kubeflowv1.JobStatus{Conditions: []kubeflowv1.JobCondition{
		cond(kubeflowv1.JobFailed, corev1.ConditionTrue, now, "TFJobFailed", long)}}}, now, time.Minute)
	if len(obs.Message) > maxMessage || len(obs.Error.Message) > maxMessage {
		t.Errorf("message of %d bytes, error of %d; want at most %d", len(obs.Message), len(obs.Error.Message), maxMessage)
	}
}
