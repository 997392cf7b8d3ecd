package clustered

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/tasklog"
)

// CurrentCondition is the JobSet's condition that is true and changed last
// (of those that changed in the same second, the later one in the list: the
// controller appends them), or nil.
func CurrentCondition(conds []metav1.Condition) *metav1.Condition {
	var cur *metav1.Condition
	for i := range conds {
		c := &conds[i]
		if c.Status != metav1.ConditionTrue {
			continue
		}
		if cur == nil || !c.LastTransitionTime.Before(&cur.LastTransitionTime) {
			cur = c
		}
	}
	return cur
}

// workersStatus is the status of the workers' replicated job, or nil.
func workersStatus(js *jobsetv1alpha2.JobSet) *jobsetv1alpha2.ReplicatedJobStatus {
	for i := range js.Status.ReplicatedJobsStatus {
		if js.Status.ReplicatedJobsStatus[i].Name == WorkersReplicatedJob {
			return &js.Status.ReplicatedJobsStatus[i]
		}
	}
	return nil
}

// started says whether the JobSet's pods have run, as Flyte tells: it was
// restarted, its workers' Job is active, ready, succeeded or failed, or the
// attempt was already reported running (Flyte's plugin state; here the
// TaskAction's status).
func started(js *jobsetv1alpha2.JobSet, ta *flytev1.TaskAction, attempt int32) bool {
	if js.Status.Restarts > 0 {
		return true
	}
	if w := workersStatus(js); w != nil && (w.Ready > 0 || w.Active > 0 || w.Succeeded > 0 || w.Failed > 0) {
		return true
	}
	return ta != nil && ta.Status.Attempts == uint32(max(attempt, 1)) && ta.Status.PluginPhase == string(plugin.PhaseRunning)
}

// ObserveJobSet maps the JobSet's status as Flyte does: its current
// condition Completed succeeded, Failed a retryable user failure with the
// condition's reason as the code, RestartingJobSet and the others running;
// without a condition it is running once its pods have run, else
// initializing (pods scheduling, DNS resolving). Suspended (by Kueue, say)
// is queued.
func ObserveJobSet(js *jobsetv1alpha2.JobSet, ta *flytev1.TaskAction, attempt int32) plugin.Observation {
	obs := plugin.Observation{Deleting: js.DeletionTimestamp != nil}
	restarts := js.Status.Restarts
	c := CurrentCondition(js.Status.Conditions)
	if c == nil {
		if started(js, ta, attempt) {
			obs.Phase, obs.Message = plugin.PhaseRunning, runningMessage(restarts)
			return obs
		}
		obs.Phase, obs.Message, obs.OccurredAt = plugin.PhaseInitializing, "pods scheduling / DNS resolving", js.CreationTimestamp.Time
		return obs
	}
	obs.OccurredAt = c.LastTransitionTime.Time
	switch jobsetv1alpha2.JobSetConditionType(c.Type) {
	case jobsetv1alpha2.JobSetCompleted:
		obs.Phase, obs.Finished = plugin.PhaseSucceeded, true
	case jobsetv1alpha2.JobSetFailed:
		obs.Phase, obs.Finished = plugin.PhaseRetryableFailure, true
		obs.Error = &plugin.ExecError{Code: c.Reason, Kind: flytev1.ErrorKindUser, Message: c.Message}
		if obs.Error.Code == "" {
			obs.Error.Code = plugin.CodeUnknownError
		}
	case jobsetv1alpha2.JobSetRestarting:
		obs.Phase, obs.Message = plugin.PhaseRunning, fmt.Sprintf("restart in progress (attempt %d)", restarts)
	case jobsetv1alpha2.JobSetSuspended:
		obs.Phase, obs.Message = plugin.PhaseQueued, "suspended"
		if c.Message != "" {
			obs.Message += ": " + c.Message
		}
	default:
		obs.Phase, obs.Message = plugin.PhaseRunning, runningMessage(restarts)
	}
	return obs
}

func runningMessage(restarts int32) string {
	return fmt.Sprintf("running (restart attempt %d)", restarts)
}

// maxLinkedRanks bounds the ranks that get links: every event carries them.
const maxLinkedRanks = 100

// JobSetLogs are the links of plugins.logs for each rank's pod, as Flyte
// renders them: the pod named <jobset>-workers-0-<rank> (the Job controller
// adds a random suffix to the real pod's name, which Flyte's links do not
// know either), log name "rank-<rank>", the primary container, the JobSet's
// creation as the pod's start and, once it ended, its end as the finish.
func JobSetLogs(logs *tasklog.Renderer, tc plugin.TaskContext, js *jobsetv1alpha2.JobSet, ended time.Time) ([]*core.TaskLog, error) {
	if logs == nil {
		return nil, nil
	}
	var replicas int32
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == WorkersReplicatedJob && rj.Template.Spec.Parallelism != nil {
			replicas = *rj.Template.Spec.Parallelism
			break
		}
	}
	// The template's own links come with each rank's, as dashboards.
	in := plugin.LogInput(tc, js.Namespace, js.Name)
	in.ContainerName, in.PodStart, in.PodFinish = js.Annotations[AnnotationPrimaryContainer], js.CreationTimestamp.Time, ended
	var out []*core.TaskLog
	for rank := int32(0); rank < min(replicas, maxLinkedRanks); rank++ {
		in.PodName = fmt.Sprintf("%s-%s-0-%d", js.Name, WorkersReplicatedJob, rank)
		in.LogName = fmt.Sprintf("rank-%d", rank)
		links, err := logs.Links(in)
		if err != nil {
			return nil, err
		}
		out = append(out, links...)
	}
	return out, nil
}
