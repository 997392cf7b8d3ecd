package dask

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	daskv1 "github.com/dask/dask-kubernetes/v2023/dask_kubernetes/operator/go_client/pkg/apis/kubernetes.dask.org/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/tasklog"
)

// CodeDaskJobFailed is Flyte's code for a DaskJob the operator marked
// Failed (its job runner pod failed).
const CodeDaskJobFailed = "DownstreamSystemError"

// envEnableVSCode is Flyte's variable that asks for the VS Code link.
const envEnableVSCode = "_F_E_VS"

// varSchedulerName is the extra variable the log templates of a Dask task
// may use: the scheduler pod's name.
const varSchedulerName = "daskSchedulerName"

// ObserveJob maps the DaskJob's status.jobStatus as Flyte does: no status
// yet, JobCreated and ClusterCreated are Initializing; Running (or anything
// else) Running; Successful succeeded; Failed a retryable user failure with
// Flyte's code. The operator records the job runner's start and end
// (status.startTime, status.endTime): they are the phases' times.
func ObserveJob(job *daskv1.DaskJob) plugin.Observation {
	obs := plugin.Observation{Deleting: job.DeletionTimestamp != nil, OccurredAt: job.CreationTimestamp.Time}
	st := job.Status
	switch st.JobStatus {
	case "":
		obs.Phase, obs.Message = plugin.PhaseInitializing, "waiting for the Dask operator to create the job"
	case daskv1.DaskJobCreated:
		obs.Phase, obs.Message = plugin.PhaseInitializing, "job created, creating the Dask cluster"
	case daskv1.DaskJobClusterCreated:
		obs.Phase, obs.Message = plugin.PhaseInitializing, "Dask cluster created, starting the job runner"
	case daskv1.DaskJobSuccessful:
		obs.Phase, obs.Finished = plugin.PhaseSucceeded, true
		obs.OccurredAt = st.EndTime.Time
	case daskv1.DaskJobFailed:
		obs.Phase, obs.Finished = plugin.PhaseRetryableFailure, true
		obs.OccurredAt = st.EndTime.Time
		obs.Error = &plugin.ExecError{Code: CodeDaskJobFailed, Kind: flytev1.ErrorKindUser, Message: "Dask Job failed"}
		if st.JobRunnerPodName != "" {
			obs.Message = "the job runner pod " + st.JobRunnerPodName + " failed"
		}
	default:
		obs.Phase = plugin.PhaseRunning
		obs.OccurredAt = st.StartTime.Time
		if st.JobStatus != daskv1.DaskJobRunning {
			obs.Message = fmt.Sprintf("job status %q", st.JobStatus)
		}
	}
	if obs.OccurredAt.IsZero() {
		obs.OccurredAt = job.CreationTimestamp.Time
	}
	return obs
}

// JobLogs are the configured links of the job's runner pod, as Flyte
// renders them (the pod named in status.jobRunnerPodName, empty before the
// operator created it). The scheduler pod's name, which Flyte finds by
// listing pods, is not known here: {{ .daskSchedulerName }} renders empty.
// Dashboard and IDE links are ready while the job runs.
func JobLogs(logs *tasklog.Renderer, tc plugin.TaskContext, job *daskv1.DaskJob, phase plugin.Phase) ([]*core.TaskLog, error) {
	if logs == nil {
		return nil, nil
	}
	in := plugin.LogInput(tc, job.Namespace, job.Name)
	in.PodName = job.Status.JobRunnerPodName
	in.Extra = map[string]string{varSchedulerName: ""}
	if cs := job.Spec.Cluster.Spec.Scheduler.Spec.Containers; len(cs) > 0 {
		in.EnableVSCode = vscodeEnabled(cs[0].Env)
	}
	links, err := logs.Links(in)
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if l.GetLinkType() == core.TaskLog_DASHBOARD || l.GetLinkType() == core.TaskLog_IDE {
			l.Ready = phase == plugin.PhaseRunning
		}
	}
	return links, nil
}

// vscodeEnabled reads Flyte's _F_E_VS as Flyte does (a boolean; the first
// entry decides).
func vscodeEnabled(env []corev1.EnvVar) bool {
	for _, e := range env {
		if e.Name == envEnableVSCode {
			b, err := strconv.ParseBool(e.Value)
			return err == nil && b
		}
	}
	return false
}
