package local

import (
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const loopbackIP = "127.0.0.1"

// Termination message limits of the Kubernetes API: a message file is cut at
// 4096 bytes; the log fallback is the last 80 lines or 2048 bytes, whichever is smaller.
const (
	maxTerminationMessage = 4096
	maxFallbackBytes      = 2048
	maxFallbackLines      = 80
)

// containerState is what the node knows about one container's process.
type containerState struct {
	Name, Image string
	// PID is set once the process started.
	PID     int
	Started time.Time
	// Finished is set once the process exited (or could not start).
	Finished time.Time
	ExitCode int32
	Reason   string
	Message  string
	// Waiting holds a reason while the process cannot be started yet.
	Waiting        string
	WaitingMessage string
}

func (s containerState) containerID() string {
	if s.PID == 0 {
		return ""
	}
	return "local://" + strconv.Itoa(s.PID)
}

func (s containerState) status() corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: s.Name, Image: s.Image, ImageID: "local://" + s.Image, ContainerID: s.containerID()}
	switch {
	case !s.Finished.IsZero():
		cs.State.Terminated = &corev1.ContainerStateTerminated{
			ExitCode: s.ExitCode, Reason: s.Reason, Message: s.Message,
			StartedAt: metav1.NewTime(s.Started), FinishedAt: metav1.NewTime(s.Finished), ContainerID: s.containerID(),
		}
		if s.Started.IsZero() {
			cs.State.Terminated.StartedAt = metav1.NewTime(s.Finished)
		}
		f := false
		cs.Started = &f
	case s.PID != 0:
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(s.Started)}
		t := true
		cs.Started, cs.Ready = &t, true
	default:
		reason := s.Waiting
		if reason == "" {
			reason = "ContainerCreating"
		}
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: s.WaitingMessage}
		f := false
		cs.Started = &f
	}
	return cs
}

// podPhase follows the kubelet for restartPolicy Never: Running while any
// container runs, Succeeded when all exited 0, Failed when all ended and one did not.
func podPhase(states []containerState) corev1.PodPhase {
	ended, failed, running := 0, false, false
	for _, s := range states {
		switch {
		case !s.Finished.IsZero():
			ended++
			failed = failed || s.ExitCode != 0
		case s.PID != 0:
			running = true
		}
	}
	switch {
	case len(states) > 0 && ended == len(states) && failed:
		return corev1.PodFailed
	case len(states) > 0 && ended == len(states):
		return corev1.PodSucceeded
	case running || ended > 0:
		return corev1.PodRunning
	}
	return corev1.PodPending
}

// podStatus is the status a kubelet would write for pod with these
// containers, keeping the times already recorded. now stamps new conditions.
func podStatus(old corev1.PodStatus, gen int64, states []containerState, now time.Time) corev1.PodStatus {
	st := corev1.PodStatus{
		Phase:    podPhase(states),
		HostIP:   loopbackIP,
		HostIPs:  []corev1.HostIP{{IP: loopbackIP}},
		PodIP:    loopbackIP,
		PodIPs:   []corev1.PodIP{{IP: loopbackIP}},
		QOSClass: old.QOSClass,
	}
	st.StartTime = old.StartTime
	if st.StartTime == nil {
		t := metav1.NewTime(now)
		st.StartTime = &t
	}
	for _, s := range states {
		st.ContainerStatuses = append(st.ContainerStatuses, s.status())
	}
	sort.Slice(st.ContainerStatuses, func(i, j int) bool { return st.ContainerStatuses[i].Name < st.ContainerStatuses[j].Name })

	allRunning := len(states) > 0
	for _, s := range states {
		allRunning = allRunning && s.PID != 0 && s.Finished.IsZero()
	}
	ready, reason := corev1.ConditionFalse, "ContainersNotReady"
	switch {
	case allRunning:
		ready, reason = corev1.ConditionTrue, ""
	case st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed:
		reason = "PodCompleted"
	}
	started := corev1.ConditionFalse
	if st.Phase != corev1.PodPending {
		started = corev1.ConditionTrue
	}
	conds := []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: started},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: ready, Reason: reason},
		{Type: corev1.ContainersReady, Status: ready, Reason: reason},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	}
	for i := range conds {
		conds[i].ObservedGeneration = gen
		conds[i].LastTransitionTime = metav1.NewTime(now)
		for _, o := range old.Conditions {
			if o.Type == conds[i].Type && o.Status == conds[i].Status {
				conds[i].LastTransitionTime = o.LastTransitionTime // unchanged: keep when it became so
			}
		}
	}
	st.Conditions = conds
	return st
}

// terminationMessage is what a kubelet reports as the container's message:
// the message file if the process wrote one, else with FallbackToLogsOnError
// and a failure the tail of its log.
func terminationMessage(file, log []byte, policy corev1.TerminationMessagePolicy, exitCode int32) string {
	if len(file) > 0 {
		if len(file) > maxTerminationMessage {
			file = file[:maxTerminationMessage]
		}
		return string(file)
	}
	if policy != corev1.TerminationMessageFallbackToLogsOnError || exitCode == 0 {
		return ""
	}
	return string(logTail(log, maxFallbackBytes, maxFallbackLines))
}

// logTail is the last maxLines lines of b, and at most maxBytes of them.
func logTail(b []byte, maxBytes, maxLines int) []byte {
	if len(b) > maxBytes {
		b = b[len(b)-maxBytes:]
	}
	return lastLines(b, maxLines)
}

// exitReason is the kubelet's reason for a terminated container.
func exitReason(code int32) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
