package ray

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

func TestObserveJob(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	started, ended := created.Add(time.Minute), created.Add(time.Hour)
	at := func(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }
	cases := []struct {
		name     string
		status   rayv1.RayJobStatus
		phase    plugin.Phase
		at       time.Time
		finished bool
		code     string
		kind     flytev1.ErrorKind
		message  string
	}{
		{name: "not picked up", phase: plugin.PhaseQueued, at: created, message: "waiting for KubeRay"},
		{name: "cluster provisioning", phase: plugin.PhaseInitializing, at: started, message: "(head not ready, 1 of 3 workers ready)",
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing, StartTime: at(started),
				RayClusterStatus: rayv1.RayClusterStatus{DesiredWorkerReplicas: 3, ReadyWorkerReplicas: 1,
					Conditions: []metav1.Condition{{Type: string(rayv1.HeadPodReady), Status: metav1.ConditionFalse}}}}},
		{name: "cluster provisioning, replica failure", phase: plugin.PhaseInitializing, at: created, message: "replica failure: quota",
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusInitializing,
				RayClusterStatus: rayv1.RayClusterStatus{Conditions: []metav1.Condition{{Type: string(rayv1.RayClusterReplicaFailure), Status: metav1.ConditionTrue, Message: "quota"}}}}},
		{name: "job pending", phase: plugin.PhaseRunning, message: "the Ray job is pending",
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, JobStatus: rayv1.JobStatusPending}},
		{name: "job running", phase: plugin.PhaseRunning, at: started, message: "the Ray job is running",
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning, JobStatus: rayv1.JobStatusRunning,
				RayJobStatusInfo: rayv1.RayJobStatusInfo{StartTime: at(started)}}},
		{name: "succeeded", phase: plugin.PhaseSucceeded, at: ended, finished: true,
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, JobStatus: rayv1.JobStatusSucceeded, EndTime: at(ended)}},
		{name: "succeeded, the job's end", phase: plugin.PhaseSucceeded, at: ended, finished: true,
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, JobStatus: rayv1.JobStatusSucceeded,
				RayJobStatusInfo: rayv1.RayJobStatusInfo{EndTime: at(ended)}}},
		{name: "stopped", phase: plugin.PhasePermanentFailure, at: ended, finished: true, code: CodeJobStopped, kind: flytev1.ErrorKindUser, message: "was stopped",
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, JobStatus: rayv1.JobStatusStopped, EndTime: at(ended)}},
		{name: "failed", phase: plugin.PhasePermanentFailure, at: ended, finished: true, code: CodeTaskFailedWithError, kind: flytev1.ErrorKindUser,
			message: "[AppFailed] Job entrypoint command failed with exit code 1",
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusFailed, JobStatus: rayv1.JobStatusFailed, EndTime: at(ended),
				Reason: rayv1.AppFailed, Message: "Job entrypoint command failed with exit code 1"}},
		{name: "submission failed", phase: plugin.PhasePermanentFailure, finished: true, code: CodeTaskFailedWithError, kind: flytev1.ErrorKindUser,
			message: "[SubmissionFailed]",
			status:  rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusFailed, Reason: rayv1.SubmissionFailed}},
		{name: "KubeRay lost the end", phase: plugin.PhaseRetryableFailure, at: ended, finished: true, code: CodeTaskFailedWithError, kind: flytev1.ErrorKindSystem,
			message: "[JobDeploymentStatusTransitionGracePeriodExceeded]",
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusFailed, EndTime: at(ended),
				Reason: rayv1.JobDeploymentStatusTransitionGracePeriodExceeded}},
		{name: "validation failed", phase: plugin.PhasePermanentFailure, code: CodeValidationFailed, kind: flytev1.ErrorKindUser, message: "name is too long",
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusValidationFailed, Reason: rayv1.ValidationFailed, Message: "name is too long"}},
		{name: "suspended", phase: plugin.PhaseQueued, at: created, message: "suspended",
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusSuspended}},
		{name: "suspending", phase: plugin.PhaseQueued, at: created, message: "about to be suspended",
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusSuspending}},
		{name: "retrying", phase: plugin.PhaseInitializing, at: created, message: "Retrying",
			status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRetrying}},
		{name: "unknown", phase: plugin.PhaseRunning, message: `"Hibernating"`,
			status: rayv1.RayJobStatus{JobDeploymentStatus: "Hibernating"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := &rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: "r-a0-0", CreationTimestamp: metav1.NewTime(created)}, Status: tc.status}
			obs := ObserveJob(job)
			if obs.Phase != tc.phase || !obs.OccurredAt.Equal(tc.at) || obs.Finished != tc.finished || obs.Deleting {
				t.Errorf("phase %s at %v finished %v, want %s at %v finished %v", obs.Phase, obs.OccurredAt, obs.Finished, tc.phase, tc.at, tc.finished)
			}
			if !strings.Contains(obs.Message, tc.message) {
				t.Errorf("message %q, want it to contain %q", obs.Message, tc.message)
			}
			switch {
			case tc.code == "" && obs.Error != nil:
				t.Errorf("error %+v, want none", obs.Error)
			case tc.code != "" && (obs.Error == nil || obs.Error.Code != tc.code || obs.Error.Kind != tc.kind):
				t.Errorf("error %+v, want %s %s", obs.Error, tc.kind, tc.code)
			}
			if obs.Phase.IsTerminal() != (obs.Error != nil || obs.Phase == plugin.PhaseSucceeded) {
				t.Error("a failure without an error")
			}
		})
	}
}

// TestObserveDeleting: a RayJob deleted before it ended is a system
// failure (someone else deleted it); one that ended keeps its end.
func TestObserveDeleting(t *testing.T) {
	now := metav1.Now()
	obs := ObserveJob(&rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{Name: "r-0", Namespace: "ns", DeletionTimestamp: &now},
		Status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusRunning}})
	if !obs.Deleting || obs.Phase != plugin.PhaseRetryableFailure || obs.Error == nil ||
		obs.Error.Code != CodeUnexpectedObjectDeletion || obs.Error.Kind != flytev1.ErrorKindSystem {
		t.Errorf("running: %+v", obs)
	}
	obs = ObserveJob(&rayv1.RayJob{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now},
		Status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusComplete, JobStatus: rayv1.JobStatusSucceeded}})
	if !obs.Deleting || obs.Phase != plugin.PhaseSucceeded || !obs.Finished {
		t.Errorf("ended: %+v", obs)
	}
}

// TestObserveLongMessage: the operator's words are bounded.
func TestObserveLongMessage(t *testing.T) {
	obs := ObserveJob(&rayv1.RayJob{Status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusFailed, Message: strings.Repeat("x", 10000)}})
	if len(obs.Error.Message) > maxMessage || len(obs.Message) > maxMessage {
		t.Errorf("message of %d bytes", len(obs.Error.Message))
	}
}
