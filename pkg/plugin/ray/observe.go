package ray

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// Error codes of a RayJob's end.
const (
	// CodeTaskFailedWithError is Flyte's code of a failed Ray job.
	CodeTaskFailedWithError = "TaskFailedWithError"
	// CodeJobStopped: the Ray job was stopped (ray job stop, the dashboard)
	// before it ended by itself.
	CodeJobStopped = "RayJobStopped"
	// CodeValidationFailed: KubeRay refused the RayJob's spec.
	CodeValidationFailed = "RayJobValidationFailed"
	// CodeUnexpectedObjectDeletion: the RayJob is being deleted before it
	// ended, by someone else than the executor (Flyte's code).
	CodeUnexpectedObjectDeletion = "UnexpectedObjectDeletion"
)

// maxMessage bounds the operator's words kept in a message.
const maxMessage = 2048

// ObserveJob maps a RayJob's status to the attempt's phase, as Flyte's
// plugin maps it: KubeRay first provisions the cluster (Initializing), then
// submits the job (Running) until it ends, Complete or Failed. A Failed job
// is a permanent USER failure (the runtime's error.pb, read by the
// reconciler once Finished, may make it retryable) except when KubeRay gave
// up waiting for the deployment status to follow the job's end, a retryable
// SYSTEM failure. The differences from Flyte: a STOPPED job is a failure
// (Flyte reports a success), ValidationFailed fails at once, and a status
// this version does not know keeps the attempt running (Flyte returns an
// error every round). A RayJob being deleted before it ended is a system
// failure, as in Flyte.
func ObserveJob(job *rayv1.RayJob) plugin.Observation {
	obs := observeStatus(job)
	if obs.Deleting && !obs.Phase.IsTerminal() {
		msg := fmt.Sprintf("RayJob %s/%s is being deleted", job.Namespace, job.Name)
		return plugin.Observation{Phase: plugin.PhaseRetryableFailure, Deleting: true, Message: msg,
			Error: &plugin.ExecError{Code: CodeUnexpectedObjectDeletion, Kind: flytev1.ErrorKindSystem, Message: msg}}
	}
	return obs
}

func observeStatus(job *rayv1.RayJob) plugin.Observation {
	st := job.Status
	obs := plugin.Observation{Deleting: job.DeletionTimestamp != nil}
	created := job.CreationTimestamp.Time
	switch st.JobDeploymentStatus {
	case rayv1.JobDeploymentStatusNew:
		obs.Phase, obs.OccurredAt, obs.Message = plugin.PhaseQueued, created, "waiting for KubeRay to start the Ray cluster"
	case rayv1.JobDeploymentStatusInitializing:
		obs.Phase, obs.OccurredAt = plugin.PhaseInitializing, timeOr(st.StartTime, created)
		obs.Message = "the Ray cluster is being created" + provisioning(st.RayClusterStatus)
	case rayv1.JobDeploymentStatusRetrying, rayv1.JobDeploymentStatusWaiting:
		// Neither happens to the RayJobs the plugin builds (no backoffLimit,
		// no interactive mode); the job is not running.
		obs.Phase, obs.OccurredAt = plugin.PhaseInitializing, timeOr(st.StartTime, created)
		obs.Message = fmt.Sprintf("the RayJob is %s", st.JobDeploymentStatus)
	case rayv1.JobDeploymentStatusSuspending, rayv1.JobDeploymentStatusSuspended:
		obs.Phase, obs.OccurredAt = plugin.PhaseQueued, created
		obs.Message = fmt.Sprintf("the Ray cluster is %s", map[rayv1.JobDeploymentStatus]string{
			rayv1.JobDeploymentStatusSuspending: "about to be suspended", rayv1.JobDeploymentStatusSuspended: "suspended"}[st.JobDeploymentStatus])
	case rayv1.JobDeploymentStatusRunning:
		obs.Phase = plugin.PhaseRunning
		if t := st.RayJobStatusInfo.StartTime; t != nil {
			obs.OccurredAt = t.Time
		}
		obs.Message = "the Ray job is " + jobStatusWords(st.JobStatus)
	case rayv1.JobDeploymentStatusComplete:
		obs.Finished, obs.OccurredAt = true, endTime(st)
		if st.JobStatus == rayv1.JobStatusStopped {
			obs.Phase = plugin.PhasePermanentFailure
			obs.Error = &plugin.ExecError{Code: CodeJobStopped, Kind: flytev1.ErrorKindUser,
				Message: plugin.Truncate(fmt.Sprintf("the Ray job %s was stopped before it ended%s", st.JobId, detail(st.Message)), maxMessage)}
			obs.Message = obs.Error.Message
			break
		}
		obs.Phase, obs.Message = plugin.PhaseSucceeded, "the Ray job succeeded"
	case rayv1.JobDeploymentStatusFailed:
		obs.Finished, obs.OccurredAt = true, endTime(st)
		msg := plugin.Truncate(fmt.Sprintf("the Ray job of RayJob %s failed: [%s] %s", job.Name, st.Reason, st.Message), maxMessage)
		obs.Phase, obs.Message = plugin.PhasePermanentFailure, msg
		obs.Error = &plugin.ExecError{Code: CodeTaskFailedWithError, Kind: flytev1.ErrorKindUser, Message: msg}
		if st.Reason == rayv1.JobDeploymentStatusTransitionGracePeriodExceeded {
			// KubeRay lost track of the job's end, not the task's fault.
			obs.Phase, obs.Error.Kind = plugin.PhaseRetryableFailure, flytev1.ErrorKindSystem
		}
	case rayv1.JobDeploymentStatusValidationFailed:
		msg := plugin.Truncate(fmt.Sprintf("KubeRay refused RayJob %s: %s", job.Name, st.Message), maxMessage)
		obs.Phase, obs.Message = plugin.PhasePermanentFailure, msg
		obs.Error = &plugin.ExecError{Code: CodeValidationFailed, Kind: flytev1.ErrorKindUser, Message: msg}
	default:
		obs.Phase = plugin.PhaseRunning
		obs.Message = fmt.Sprintf("KubeRay reports deployment status %q, which this executor does not know", st.JobDeploymentStatus)
	}
	return obs
}

// provisioning says how far the cluster's creation is, from what KubeRay
// copied of its status: the head's readiness, the workers ready, and a
// replica KubeRay could not create.
func provisioning(c rayv1.RayClusterStatus) string {
	var parts []string
	if cond := meta.FindStatusCondition(c.Conditions, string(rayv1.HeadPodReady)); cond != nil {
		parts = append(parts, map[bool]string{true: "head ready", false: "head not ready"}[cond.Status == metav1.ConditionTrue])
	}
	if c.DesiredWorkerReplicas > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d workers ready", c.ReadyWorkerReplicas, c.DesiredWorkerReplicas))
	}
	if cond := meta.FindStatusCondition(c.Conditions, string(rayv1.RayClusterReplicaFailure)); cond != nil && cond.Status == metav1.ConditionTrue {
		parts = append(parts, "replica failure: "+cond.Message)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func jobStatusWords(s rayv1.JobStatus) string {
	switch s {
	case rayv1.JobStatusNew:
		return "being submitted"
	case rayv1.JobStatusPending:
		return "pending"
	case rayv1.JobStatusRunning:
		return "running"
	}
	return string(s)
}

func detail(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// endTime is when the job ended: KubeRay's end of the deployment, else the
// Ray job's own end (zero: now).
func endTime(st rayv1.RayJobStatus) time.Time {
	if st.EndTime != nil {
		return st.EndTime.Time
	}
	if t := st.RayJobStatusInfo.EndTime; t != nil {
		return t.Time
	}
	return time.Time{}
}

func timeOr(t *metav1.Time, def time.Time) time.Time {
	if t != nil && !t.IsZero() {
		return t.Time
	}
	return def
}
