package container

import (
	"fmt"
	"strconv"
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

func pending(pod *corev1.Pod, now time.Time, s plugin.Settings) plugin.Observation {
	if c := condition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
		return plugin.Observation{Phase: plugin.PhaseWaitingForResources, Message: joinReason(c.Reason, c.Message)}
	}
	if o, ok := secretMountStuck(pod, now, s); ok {
		return o
	}
	if o, ok := worstWaiting(pod, now, s); ok {
		return o
	}
	return plugin.Observation{Phase: plugin.PhaseQueued, Message: podReason(pod)}
}

// Severity of a waiting container, to pick the one that decides the phase.
const (
	sevOther = iota + 1
	sevInitializing
	sevInGrace
	sevGraceOver
	sevPermanent
)

// worstWaiting classifies the waiting init and regular containers and
// returns the most severe reading.
func worstWaiting(pod *corev1.Pod, now time.Time, s plugin.Settings) (plugin.Observation, bool) {
	var best plugin.Observation
	bestSev := 0
	visit := func(statuses []corev1.ContainerStatus, isInit bool) {
		for i := range statuses {
			w := statuses[i].State.Waiting
			if w == nil || w.Reason == "" {
				continue
			}
			o, sev := waiting(statuses[i].Name, w, now, graceStart(pod, isInit), s)
			if sev > bestSev || (sev == sevInGrace && sev == bestSev && o.RecheckAfter < best.RecheckAfter) {
				best, bestSev = o, sev
			}
		}
	}
	visit(pod.Status.InitContainerStatuses, true)
	visit(pod.Status.ContainerStatuses, false)
	return best, bestSev > 0
}

func waiting(name string, w *corev1.ContainerStateWaiting, now, since time.Time, s plugin.Settings) (plugin.Observation, int) {
	msg := fmt.Sprintf("container %s: %s", name, joinReason(w.Reason, w.Message))
	switch w.Reason {
	case "InvalidImageName", "CreateContainerConfigError", "ErrImageNeverPull":
		// Retrying cannot fix the image name or the referenced config.
		return failure(plugin.PhasePermanentFailure, w.Reason, flytev1.ErrorKindUser, msg), sevPermanent
	case "ImagePullBackOff", "ErrImagePull":
		return withGrace(msg, w.Reason, plugin.PhaseRetryableFailure, gracePeriod(s.ImagePullGracePeriod), now, since)
	case "CreateContainerError":
		return withGrace(msg, w.Reason, plugin.PhasePermanentFailure, gracePeriod(s.CreateContainerGracePeriod), now, since)
	case "ContainerCreating", "PodInitializing":
		return plugin.Observation{Phase: plugin.PhaseInitializing, Message: msg}, sevInitializing
	default:
		return plugin.Observation{Phase: plugin.PhaseQueued, Message: msg}, sevOther
	}
}

// withGrace keeps the attempt initializing until grace has passed since
// since, then fails it with phase.
func withGrace(msg, code string, phase plugin.Phase, grace time.Duration, now, since time.Time) (plugin.Observation, int) {
	// API timestamps are whole seconds: count from the end of that second,
	// and never let clock skew shorten the grace.
	since = since.Truncate(time.Second).Add(time.Second)
	elapsed := max(now.Sub(since), 0)
	if elapsed >= grace {
		return failure(phase, code, flytev1.ErrorKindUser, fmt.Sprintf("grace period %v exceeded: %s", grace, msg)), sevGraceOver
	}
	return plugin.Observation{Phase: plugin.PhaseInitializing, Message: msg, RecheckAfter: max(grace-elapsed, time.Second)}, sevInGrace
}

func gracePeriod(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultGracePeriod
	case d < 0:
		return 0
	}
	return d
}

// graceStart is the reference time of the grace periods (see ObservePod).
func graceStart(pod *corev1.Pod, isInit bool) time.Time {
	var t time.Time
	later := func(u time.Time) {
		if u.After(t) {
			t = u
		}
	}
	if pod.Status.StartTime != nil {
		later(pod.Status.StartTime.Time)
	}
	for _, c := range pod.Status.Conditions {
		switch {
		case (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status == corev1.ConditionFalse:
			later(c.LastTransitionTime.Time)
		case !isInit && c.Type == corev1.PodInitialized && c.Status == corev1.ConditionTrue:
			later(c.LastTransitionTime.Time)
		}
	}
	if t.IsZero() {
		t = pod.CreationTimestamp.Time
	}
	return t
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
	c := condition(pod, disruptionTarget)
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

// primaryContainer is the container that decides the outcome: the one the
// annotation names, else the default name, else the first.
func primaryContainer(pod *corev1.Pod) string {
	if n := pod.Annotations[AnnotationPrimaryContainer]; n != "" {
		return n
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == DefaultPrimaryContainerName {
			return c.Name
		}
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Name
	}
	return DefaultPrimaryContainerName
}

func findStatus(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

func terminated(cs *corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	if cs == nil {
		return nil
	}
	return cs.State.Terminated
}

// finishedAt is when the container of cs terminated (zero if it has not).
func finishedAt(cs *corev1.ContainerStatus) time.Time {
	if t := terminated(cs); t != nil {
		return t.FinishedAt.Time
	}
	return time.Time{}
}

// sidecarRunning says whether a regular container of the pod has not
// terminated (one without a status counts as running). Only regular
// containers are counted: the kubelet stops init containers that restart
// always (native sidecars) by itself once every regular container exited.
func sidecarRunning(pod *corev1.Pod) bool {
	for i := range pod.Spec.Containers {
		if terminated(findStatus(pod.Status.ContainerStatuses, pod.Spec.Containers[i].Name)) == nil {
			return true
		}
	}
	return false
}

// oomKilled finds a container (init, regular or ephemeral, current or last
// state) that was OOMKilled.
func oomKilled(pod *corev1.Pod) (string, *corev1.ContainerStateTerminated) {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for i := range list {
			for _, t := range []*corev1.ContainerStateTerminated{list[i].State.Terminated, list[i].LastTerminationState.Terminated} {
				if t != nil && strings.Contains(t.Reason, "OOMKilled") {
					return list[i].Name, t
				}
			}
		}
	}
	return "", nil
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// latestTransition is the latest container start or finish or condition
// transition recorded on the pod; zero if there is none.
func latestTransition(pod *corev1.Pod) time.Time {
	var t time.Time
	later := func(u time.Time) {
		if u.After(t) {
			t = u
		}
	}
	for _, c := range pod.Status.Conditions {
		later(c.LastTransitionTime.Time)
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			for _, st := range []corev1.ContainerState{cs.State, cs.LastTerminationState} {
				if st.Running != nil {
					later(st.Running.StartedAt.Time)
				}
				if st.Terminated != nil {
					later(st.Terminated.StartedAt.Time)
					later(st.Terminated.FinishedAt.Time)
				}
			}
		}
	}
	return t
}

func podReason(pod *corev1.Pod) string { return joinReason(pod.Status.Reason, pod.Status.Message) }

func joinReason(reason, msg string) string {
	switch {
	case reason == "":
		return msg
	case msg == "":
		return reason
	}
	return reason + ": " + msg
}

func withDetail(s, detail string) string {
	if detail = strings.TrimSpace(detail); detail != "" {
		return s + ": " + detail
	}
	return s
}

func truncate(s string, n int) string { return plugin.Truncate(s, n) }

// CodeSecretMountFailed is the error of a pod that could not mount the
// Secrets it needs (usually: one does not exist) within the grace period.
const CodeSecretMountFailed = "SecretMountFailed"

// secretMountStuck reads a scheduled pod whose sandbox has not been made
// ready since its scheduling while it mounts Secrets. The kubelet mounts
// volumes before it creates the sandbox (and only then pulls images), and
// reports a missing Secret only as a FailedMount Event: without this the
// attempt would wait for its timeout. Inside createContainerGracePeriod the
// attempt is initializing; after it, a permanent USER failure that names the
// Secrets the pod mounts.
func secretMountStuck(pod *corev1.Pod, now time.Time, s plugin.Settings) (plugin.Observation, bool) {
	var names []string
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && (v.Secret.Optional == nil || !*v.Secret.Optional) {
			names = append(names, strconv.Quote(v.Secret.SecretName))
		}
	}
	ready := condition(pod, corev1.PodReadyToStartContainers)
	scheduled := condition(pod, corev1.PodScheduled)
	if len(names) == 0 || ready == nil || ready.Status != corev1.ConditionFalse || scheduled == nil || scheduled.Status != corev1.ConditionTrue {
		return plugin.Observation{}, false
	}
	since := ready.LastTransitionTime.Time
	if since.Before(scheduled.LastTransitionTime.Time) {
		since = scheduled.LastTransitionTime.Time
	}
	secrets := strings.Join(names, ", ")
	o, sev := withGrace("waiting for the pod's volumes to be mounted (Secrets "+secrets+")", CodeSecretMountFailed,
		plugin.PhasePermanentFailure, gracePeriod(s.CreateContainerGracePeriod), now, since)
	if sev == sevGraceOver {
		o = failure(plugin.PhasePermanentFailure, CodeSecretMountFailed, flytev1.ErrorKindUser, fmt.Sprintf(
			"the pod's volumes were not mounted within %v: it mounts Secret(s) %s, and a Secret that does not exist (or lacks a requested key) keeps its containers from starting",
			gracePeriod(s.CreateContainerGracePeriod), secrets))
	}
	return o, true
}
