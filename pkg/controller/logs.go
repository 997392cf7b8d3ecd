package controller

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

// attemptLogs are where an attempt's logs are: the configured links rendered
// for its pod, and the pod and containers that hold them.
type attemptLogs struct {
	Links   []*core.TaskLog
	Context *core.LogContext
}

// podLogs renders the log links of an attempt's pod (rl nil: no links, the
// log context only). Pure: the pod is as gathered.
func podLogs(rl *tasklog.Renderer, tc plugin.TaskContext, pod *corev1.Pod) (attemptLogs, error) {
	primary := primaryContainer(pod)
	pc := &core.PodLogContext{Namespace: pod.Namespace, PodName: pod.Name, PrimaryContainerName: primary}
	statuses := map[string]corev1.ContainerStatus{}
	for _, cs := range pod.Status.ContainerStatuses {
		statuses[cs.Name] = cs
	}
	for _, c := range pod.Spec.Containers {
		cc := &core.ContainerContext{ContainerName: c.Name}
		if start, end := containerTimes(statuses[c.Name]); !start.IsZero() {
			cc.Process = &core.ContainerContext_ProcessContext{ContainerStartTime: timestamppb.New(start)}
			if !end.IsZero() {
				cc.Process.ContainerEndTime = timestamppb.New(end)
			}
		}
		pc.Containers = append(pc.Containers, cc)
	}
	logs := attemptLogs{Context: &core.LogContext{PrimaryPodName: pod.Name, Pods: []*core.PodLogContext{pc}}}
	if rl == nil {
		return logs, nil
	}
	in := plugin.LogInput(tc, pod.Namespace, pod.Name)
	in.PodName, in.PodUID, in.HostName = pod.Name, string(pod.UID), pod.Spec.Hostname
	in.ContainerName, in.ContainerID = primary, statuses[primary].ContainerID
	in.PodStart = pod.CreationTimestamp.Time
	if _, end := containerTimes(statuses[primary]); !end.IsZero() {
		in.PodFinish = end
	}
	links, err := rl.Links(in)
	if err != nil {
		return logs, err
	}
	logs.Links = links
	return logs, nil
}

// primaryContainer is the task's container: the one the pod's annotation
// names (as Flyte marks it), else the first.
func primaryContainer(pod *corev1.Pod) string {
	if n := pod.Annotations[task.PrimaryContainerConfigKey]; n != "" {
		return n
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Name
	}
	return ""
}

func containerTimes(cs corev1.ContainerStatus) (start, end time.Time) {
	switch {
	case cs.State.Running != nil:
		return cs.State.Running.StartedAt.Time, time.Time{}
	case cs.State.Terminated != nil:
		return cs.State.Terminated.StartedAt.Time, cs.State.Terminated.FinishedAt.Time
	}
	return time.Time{}, time.Time{}
}

// linksFor are the links an event of phase shows: while the attempt waits,
// only those meant for a pending pod; once it ended, not those hidden then.
func linksFor(links []*core.TaskLog, phase events.Phase) []*core.TaskLog {
	var out []*core.TaskLog
	for _, l := range links {
		switch phase {
		case events.PhaseQueued, events.PhaseWaitingForResources, events.PhaseInitializing:
			if !l.GetShowWhilePending() {
				continue
			}
		case events.PhaseRunning:
		default:
			if l.GetHideOnceFinished() {
				continue
			}
		}
		out = append(out, l)
	}
	return out
}
