package container

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/taskaction/executor/pkg/plugin"
)

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
