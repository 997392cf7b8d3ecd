package container

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// Error codes ObservePod produces besides container reasons (Error,
// ContainerCannotRun, ImagePullBackOff, ...) and ExitCode<N>.
const (
	CodeOOMKilled                 = "OOMKilled"
	CodeEvicted                   = "Evicted"
	CodeInterrupted               = "Interrupted"
	CodeUnknownError              = plugin.CodeUnknownError
	CodeResourceDeletedExternally = plugin.CodeResourceDeletedExternally
	CodeDeadlineExceeded          = "DeadlineExceeded"
)

// DefaultGracePeriod applies when a grace period setting is zero. A negative
// setting means no grace at all.
const DefaultGracePeriod = 3 * time.Minute

// maxMessage bounds messages taken from the pod (termination messages can
// hold a log tail).
const maxMessage = 2048

// disruptionTarget is the pod condition Kubernetes sets before it evicts,
// preempts or otherwise disrupts a pod.
const disruptionTarget corev1.PodConditionType = "DisruptionTarget"

// ObservePod reads the phase of an attempt from its pod. It is pure: now is
// the clock the grace periods are measured with.
//
// Grace periods (image pull, container creation) count from the latest of the
// pod's start time, its Ready=False and ContainersReady=False transition
// times and, for regular containers, its Initialized=True transition time:
// the kubelet does not record when a container started waiting, and this is
// the latest moment it can have started. Since these times are whole seconds,
// the grace counts from the end of that second, so it is never cut short.
//
// An attempt ended when the container that decides it terminated (the
// primary container, or the one whose failure explains the pod's): that is
// its OccurredAt, not a later change of the pod's conditions (the kubelet
// updates Ready and ContainersReady after the container stopped, and a
// sidecar may run on), so a task that finished by its deadline is not taken
// for one that overran it. Without such a time, OccurredAt is the pod's
// latest recorded transition.
//
// As in Flyte's pod plugin, the primary container's termination is the
// task's end even while sidecars keep the pod running: the observation is
// then Finished (the runtime's error.pb and outputs are read as for an ended
// pod) and Lingering while a regular container still runs, so that the
// reconciler stops the pod.
func ObservePod(pod *corev1.Pod, now time.Time, s plugin.Settings) plugin.Observation {
	obs, endedAt := classify(pod, now, s)
	if obs.Phase.IsTerminal() && !endedAt.IsZero() {
		obs.OccurredAt = endedAt
	}
	if pod.DeletionTimestamp != nil {
		obs.Deleting = true
		obs = whileDeleting(pod, obs, endedAt)
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		obs.Finished = true
	}
	if obs.OccurredAt.IsZero() {
		obs.OccurredAt = latestTransition(pod)
	}
	return obs
}

// classify maps the pod to an observation. endedAt is when the container
// that decided a terminal phase terminated (zero if none did).
func classify(pod *corev1.Pod, now time.Time, s plugin.Settings) (plugin.Observation, time.Time) {
	primary := primaryContainer(pod)
	switch pod.Status.Phase {
	case corev1.PodPending, "":
		return pending(pod, now, s), time.Time{}
	case corev1.PodRunning:
		if t := terminated(findStatus(pod.Status.ContainerStatuses, primary)); t != nil {
			// The task is done even if sidecars keep the pod running.
			o, at := fromTermination(primary, t)
			o.Finished, o.Lingering = true, sidecarRunning(pod)
			return o, at
		}
		if o, ok := worstWaiting(pod, now, s); ok && o.Phase.IsTerminal() {
			return o, time.Time{}
		}
		return plugin.Observation{Phase: plugin.PhaseRunning}, time.Time{}
	case corev1.PodSucceeded:
		if name, t := oomKilled(pod); t != nil {
			return failure(plugin.PhaseRetryableFailure, CodeOOMKilled, flytev1.ErrorKindUser,
				fmt.Sprintf("pod reported success although container %s was OOMKilled", name)), t.FinishedAt.Time
		}
		return plugin.Observation{Phase: plugin.PhaseSucceeded}, finishedAt(findStatus(pod.Status.ContainerStatuses, primary))
	case corev1.PodFailed:
		return failed(pod, primary)
	default:
		// PodUnknown: the node stopped reporting; wait for the node controller.
		return plugin.Observation{Phase: plugin.PhaseRunning, Message: "pod status is unknown: " + podReason(pod)}, time.Time{}
	}
}

func failed(pod *corev1.Pod, primary string) (plugin.Observation, time.Time) {
	if pod.Status.Reason == "Evicted" {
		return failure(plugin.PhaseRetryableFailure, CodeEvicted, flytev1.ErrorKindSystem, joinReason("pod was evicted", pod.Status.Message)), time.Time{}
	}
	pt := terminated(findStatus(pod.Status.ContainerStatuses, primary))
	if pt != nil && pt.ExitCode == 0 && !strings.Contains(pt.Reason, "OOMKilled") {
		// The task finished; a sidecar failing afterwards does not undo that.
		return plugin.Observation{Phase: plugin.PhaseSucceeded}, pt.FinishedAt.Time
	}
	if name, t := oomKilled(pod); t != nil {
		return fromTermination(name, t)
	}
	if o, ok := interrupted(pod, pt); ok {
		return o, time.Time{}
	}
	if pt != nil {
		return fromTermination(primary, pt)
	}
	// The primary never ran: an init container or sidecar failing explains why.
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			if t := terminated(&list[i]); t != nil && t.ExitCode != 0 {
				return fromTermination(list[i].Name, t)
			}
		}
	}
	switch r := pod.Status.Reason; {
	case r == "DeadlineExceeded":
		// activeDeadlineSeconds from the task's own pod template.
		return failure(plugin.PhaseRetryableFailure, CodeDeadlineExceeded, flytev1.ErrorKindUser, joinReason(r, pod.Status.Message)), time.Time{}
	case r == "NodeAffinity" || r == "NodeLost" || r == "UnexpectedAdmissionError" || strings.HasPrefix(r, "OutOf"):
		// The kubelet refused or lost the pod: the node's fault, not the task's.
		return failure(plugin.PhaseRetryableFailure, r, flytev1.ErrorKindSystem, joinReason(r, pod.Status.Message)), time.Time{}
	}
	msg := "pod failed without a recognisable reason"
	if r := podReason(pod); r != "" {
		msg += ": " + r
	}
	return failure(plugin.PhaseRetryableFailure, CodeUnknownError, flytev1.ErrorKindSystem, msg), time.Time{}
}

// interrupted says whether Kubernetes stopped the pod (node shutdown,
// preemption, API eviction). A primary that had already failed before the
// disruption was noted failed on its own.
func interrupted(pod *corev1.Pod, pt *corev1.ContainerStateTerminated) (plugin.Observation, bool) {
	switch pod.Status.Reason {
	case "Shutdown", "NodeShutdown", "Terminated", "Preempting":
		return failure(plugin.PhaseRetryableFailure, CodeInterrupted, flytev1.ErrorKindSystem,
			"pod was interrupted: "+joinReason(pod.Status.Reason, pod.Status.Message)), true
	}
	c := plugin.PodCondition(pod, disruptionTarget)
	if c == nil || c.Status != corev1.ConditionTrue {
		return plugin.Observation{}, false
	}
	if pt != nil && !pt.FinishedAt.IsZero() && !c.LastTransitionTime.IsZero() && pt.FinishedAt.Before(&c.LastTransitionTime) {
		return plugin.Observation{}, false
	}
	return failure(plugin.PhaseRetryableFailure, CodeInterrupted, flytev1.ErrorKindSystem,
		"pod was interrupted: "+joinReason(c.Reason, c.Message)), true
}

// fromTermination reads a terminated container: success on exit 0, else a
// user failure that another attempt may not repeat.
func fromTermination(name string, t *corev1.ContainerStateTerminated) (plugin.Observation, time.Time) {
	at := t.FinishedAt.Time
	if strings.Contains(t.Reason, "OOMKilled") {
		return failure(plugin.PhaseRetryableFailure, CodeOOMKilled, flytev1.ErrorKindUser,
			withDetail(fmt.Sprintf("container %s was OOMKilled (exit code %d)", name, t.ExitCode), t.Message)), at
	}
	if t.ExitCode == 0 {
		return plugin.Observation{Phase: plugin.PhaseSucceeded}, at
	}
	code := t.Reason
	if code == "" {
		code = fmt.Sprintf("ExitCode%d", t.ExitCode)
	}
	return failure(plugin.PhaseRetryableFailure, code, flytev1.ErrorKindUser,
		withDetail(fmt.Sprintf("container %s terminated with exit code %d", name, t.ExitCode), t.Message)), at
}

// whileDeleting reads a pod that is being deleted. A success, a failure
// Kubernetes already blamed on the system, and a failure that happened before
// the deletion was asked for (failedAt: when its container terminated)
// stand; anything else is the deletion's doing.
func whileDeleting(pod *corev1.Pod, obs plugin.Observation, failedAt time.Time) plugin.Observation {
	if obs.Phase == plugin.PhaseSucceeded {
		return obs
	}
	if obs.Phase.IsTerminal() && obs.Error != nil && obs.Error.Kind == flytev1.ErrorKindSystem {
		return obs
	}
	requested := pod.DeletionTimestamp.Time
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		requested = requested.Add(-time.Duration(*g) * time.Second)
	}
	if obs.Phase.IsTerminal() && !failedAt.IsZero() && failedAt.Before(requested) {
		return obs
	}
	if o, ok := interrupted(pod, nil); ok {
		o.Deleting = true
		return o
	}
	o := failure(plugin.PhaseRetryableFailure, CodeResourceDeletedExternally, flytev1.ErrorKindSystem,
		fmt.Sprintf("pod %s/%s is being deleted", pod.Namespace, pod.Name))
	o.Deleting = true
	return o
}

func failure(phase plugin.Phase, code string, kind flytev1.ErrorKind, msg string) plugin.Observation {
	msg = truncate(msg, maxMessage)
	return plugin.Observation{Phase: phase, Message: msg, Error: &plugin.ExecError{Code: code, Kind: kind, Message: msg}}
}
