package kubeflow

import (
	"fmt"
	"time"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	corev1 "k8s.io/api/core/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// Error codes of a job's end.
const (
	// CodeJobFailed is Flyte's code for a job the operator marked Failed
	// (a user error Flyte retries while attempts remain).
	CodeJobFailed = "DownstreamSystemError"
	// CodeOperatorTimeout: the operator did not touch the job within the
	// configured timeout (a system failure).
	CodeOperatorTimeout = "OperatorTimeout"
)

// maxMessage bounds the operator's words kept in an observation.
const maxMessage = 4096

// jobState is what the status mapping reads of a job.
type jobState struct {
	kind      string // PyTorchJob, ...
	namespace string
	name      string
	created   time.Time
	deleting  bool
	status    kubeflowv1.JobStatus
}

// currentCondition is the condition that says where the job is: the true
// one that changed last. Of conditions that changed in the same second (the
// operator's timestamps have seconds only) the later one in the list wins,
// since the operator appends a condition when it becomes true.
func currentCondition(conds []kubeflowv1.JobCondition) (kubeflowv1.JobCondition, bool) {
	var cur kubeflowv1.JobCondition
	found := false
	for _, c := range conds {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		if !found || !c.LastTransitionTime.Before(&cur.LastTransitionTime) {
			cur, found = c, true
		}
	}
	return cur, found
}

// observeJob maps a job's status to an attempt's phase as Flyte does: Created
// (or no condition yet) is Queued, Running and Restarting are Running,
// Succeeded is success, Failed a retryable user failure (DownstreamSystemError,
// "Job failed: reason - message"); the job ended by itself in both. A job the
// operator has not touched within timeout of its creation fails the attempt
// as a system failure, and is rechecked until then. A job being deleted that
// has not ended is a system failure (deleted by someone else).
func observeJob(j jobState, now time.Time, timeout time.Duration) plugin.Observation {
	what := fmt.Sprintf("%s %s/%s", j.kind, j.namespace, j.name)
	cond, ok := currentCondition(j.status.Conditions)
	var obs plugin.Observation
	switch {
	case ok && cond.Type == kubeflowv1.JobSucceeded:
		at := endedAt(cond, j.status)
		return plugin.Observation{Phase: plugin.PhaseSucceeded, Finished: true, OccurredAt: at, Deleting: j.deleting,
			Message: plugin.Truncate(joinReason("job succeeded", cond), maxMessage)}
	case ok && cond.Type == kubeflowv1.JobFailed:
		at := endedAt(cond, j.status)
		msg := plugin.Truncate(fmt.Sprintf("Job failed:\n\t%v - %v", cond.Reason, cond.Message), maxMessage)
		return plugin.Observation{Phase: plugin.PhaseRetryableFailure, Finished: true, OccurredAt: at, Deleting: j.deleting, Message: msg,
			Error: &plugin.ExecError{Code: CodeJobFailed, Kind: flytev1.ErrorKindUser, Message: msg}}
	case ok && (cond.Type == kubeflowv1.JobRunning || cond.Type == kubeflowv1.JobRestarting):
		obs = plugin.Observation{Phase: plugin.PhaseRunning, OccurredAt: cond.LastTransitionTime.Time}
		if cond.Type == kubeflowv1.JobRestarting {
			obs.Message = joinReason("job restarting", cond)
		}
	case ok && cond.Type == kubeflowv1.JobSuspended:
		obs = plugin.Observation{Phase: plugin.PhaseQueued, OccurredAt: cond.LastTransitionTime.Time, Message: joinReason("job suspended", cond)}
	case ok:
		obs = plugin.Observation{Phase: plugin.PhaseQueued, OccurredAt: cond.LastTransitionTime.Time, Message: joinReason("job created", cond)}
	case j.status.StartTime == nil && len(j.status.Conditions) == 0:
		// Nothing written by the operator yet.
		deadline := j.created.Add(timeout)
		if !now.Before(deadline) {
			msg := fmt.Sprintf("the Kubeflow training operator has not started %s within %v of its creation: is it running, and watching this namespace?", what, timeout)
			return plugin.Observation{Phase: plugin.PhaseRetryableFailure, Deleting: j.deleting, Message: msg,
				Error: &plugin.ExecError{Code: CodeOperatorTimeout, Kind: flytev1.ErrorKindSystem, Message: msg}}
		}
		// No message: nothing new to report since the job's creation.
		obs = plugin.Observation{Phase: plugin.PhaseQueued, RecheckAfter: deadline.Sub(now)}
	default:
		obs = plugin.Observation{Phase: plugin.PhaseQueued, Message: "job created"}
	}
	obs.Message = plugin.Truncate(obs.Message, maxMessage)
	if j.deleting {
		msg := what + " is being deleted"
		return plugin.Observation{Phase: plugin.PhaseRetryableFailure, Deleting: true, Message: msg,
			Error: &plugin.ExecError{Code: plugin.CodeResourceDeletedExternally, Kind: flytev1.ErrorKindSystem, Message: msg}}
	}
	return obs
}

// endedAt is when the job ended: its condition's change, else its completion time.
func endedAt(c kubeflowv1.JobCondition, s kubeflowv1.JobStatus) time.Time {
	if at := c.LastTransitionTime.Time; !at.IsZero() || s.CompletionTime == nil {
		return at
	}
	return s.CompletionTime.Time
}

func joinReason(what string, c kubeflowv1.JobCondition) string {
	switch {
	case c.Reason != "" && c.Message != "":
		return what + ": " + c.Reason + ": " + c.Message
	case c.Message != "":
		return what + ": " + c.Message
	case c.Reason != "":
		return what + ": " + c.Reason
	}
	return what
}
