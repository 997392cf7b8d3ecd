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

// pending reads a pod that has not started: unschedulable, a secret mount
// stuck, waiting containers (the worst decides, with grace periods), or
// queued.
func pending(pod *corev1.Pod, now time.Time, s plugin.Settings) plugin.Observation {
	if c := plugin.PodCondition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
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
	ready := plugin.PodCondition(pod, corev1.PodReadyToStartContainers)
	scheduled := plugin.PodCondition(pod, corev1.PodScheduled)
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

// Severity of a waiting container, to pick the one that decides the phase.
const (
	sevOther = iota + 1
	sevInitializing
	sevInGrace
	sevGraceOver
	sevPermanent
)
