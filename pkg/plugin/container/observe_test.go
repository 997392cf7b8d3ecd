package container

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

// testPod is a pod with a primary container "task" and a sidecar "side".
func testPod(phase corev1.PodPhase, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "act-0", Namespace: "ns", CreationTimestamp: at(0),
			Annotations: map[string]string{AnnotationPrimaryContainer: "task"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "task"}, {Name: "side"}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

func cond(t corev1.PodConditionType, s corev1.ConditionStatus, reason, msg string, when time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: at(when)})
	}
}

func started(when time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { s := at(when); p.Status.StartTime = &s }
}

func podReasonIs(reason, msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Reason, p.Status.Message = reason, msg }
}

func waitingC(name, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "details"}}})
	}
}

func initWaiting(name, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: name,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}})
	}
}

func runningC(name string, since time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(since)}}})
	}
}

func termC(name string, exit int32, reason, msg string, finished time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exit, Reason: reason, Message: msg, StartedAt: at(0), FinishedAt: at(finished)}}})
	}
}

func initTerm(name string, exit int32, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: name,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: reason, FinishedAt: at(time.Second)}}})
	}
}

func deleting(requestedAt time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		g := int64(30)
		d := at(requestedAt + 30*time.Second)
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &d, &g
	}
}

var scheduled = cond(corev1.PodScheduled, corev1.ConditionTrue, "", "", 0)

func TestObservePod(t *testing.T) {
	s := plugin.Settings{ImagePullGracePeriod: 2 * time.Minute, CreateContainerGracePeriod: 3 * time.Minute}
	notReady := cond(corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady", "", 10*time.Second)
	user, sys := flytev1.ErrorKindUser, flytev1.ErrorKindSystem
	cases := []struct {
		name        string
		pod         *corev1.Pod
		now         time.Duration // since t0
		s           *plugin.Settings
		phase       plugin.Phase
		code        string
		kind        flytev1.ErrorKind
		msg         string // substring of Message
		recheck     time.Duration
		finished    bool
		lingering   bool
		deletingObs bool
		occurredAt  time.Duration // -1: zero
	}{
		// Pending.
		{name: "unschedulable", pod: testPod(corev1.PodPending, cond(corev1.PodScheduled, corev1.ConditionFalse, "Unschedulable", "0/3 nodes are available", 0)),
			phase: plugin.PhaseWaitingForResources, msg: "Unschedulable: 0/3 nodes are available"},
		{name: "empty status is queued", pod: testPod(""), phase: plugin.PhaseQueued, occurredAt: -1},
		{name: "pending, scheduled, no statuses", pod: testPod(corev1.PodPending, scheduled), phase: plugin.PhaseQueued},
		{name: "container creating", pod: testPod(corev1.PodPending, scheduled, waitingC("task", "ContainerCreating")), phase: plugin.PhaseInitializing, msg: "ContainerCreating"},
		{name: "pod initializing", pod: testPod(corev1.PodPending, scheduled, initWaiting("init", "PodInitializing")), phase: plugin.PhaseInitializing},
		{name: "other waiting reason is queued", pod: testPod(corev1.PodPending, scheduled, waitingC("task", "SomethingNew")), phase: plugin.PhaseQueued, msg: "SomethingNew"},
		{name: "invalid image name", pod: testPod(corev1.PodPending, scheduled, waitingC("task", "InvalidImageName")),
			phase: plugin.PhasePermanentFailure, code: "InvalidImageName", kind: user},
		{name: "config error", pod: testPod(corev1.PodPending, scheduled, waitingC("side", "ContainerCreating"), waitingC("task", "CreateContainerConfigError")),
			phase: plugin.PhasePermanentFailure, code: "CreateContainerConfigError", kind: user, msg: "container task"},
		{name: "never pull", pod: testPod(corev1.PodPending, scheduled, waitingC("task", "ErrImageNeverPull")),
			phase: plugin.PhasePermanentFailure, code: "ErrImageNeverPull", kind: user},
		{name: "image pull backoff in grace", pod: testPod(corev1.PodPending, scheduled, started(0), notReady, waitingC("task", "ImagePullBackOff")),
			now: 40 * time.Second, phase: plugin.PhaseInitializing, msg: "ImagePullBackOff", recheck: 91 * time.Second},
		{name: "err image pull in grace", pod: testPod(corev1.PodPending, scheduled, started(0), notReady, waitingC("task", "ErrImagePull")),
			now: 10 * time.Second, phase: plugin.PhaseInitializing, recheck: 2 * time.Minute},
		{name: "image pull backoff after grace", pod: testPod(corev1.PodPending, scheduled, started(0), notReady, waitingC("task", "ImagePullBackOff")),
			now: 11*time.Second + 2*time.Minute, phase: plugin.PhaseRetryableFailure, code: "ImagePullBackOff", kind: user, msg: "grace period 2m0s exceeded"},
		{name: "image pull backoff at the last second of grace", pod: testPod(corev1.PodPending, scheduled, started(0), notReady, waitingC("task", "ImagePullBackOff")),
			now: 10*time.Second + 2*time.Minute + 500*time.Millisecond, phase: plugin.PhaseInitializing, recheck: time.Second},
		{name: "sub-second reference rounds up", pod: testPod(corev1.PodPending, scheduled, func(p *corev1.Pod) { st := metav1.NewTime(t0.Add(300 * time.Millisecond)); p.Status.StartTime = &st }, waitingC("task", "ImagePullBackOff")),
			now: 31 * time.Second, phase: plugin.PhaseInitializing, recheck: 90 * time.Second},
		{name: "image pull grace from start time without conditions", pod: testPod(corev1.PodPending, started(5*time.Second), waitingC("task", "ImagePullBackOff")),
			now: 66 * time.Second, phase: plugin.PhaseInitializing, recheck: time.Minute},
		{name: "image pull grace from creation as a last resort", pod: testPod(corev1.PodPending, waitingC("task", "ImagePullBackOff")),
			now: 3 * time.Minute, phase: plugin.PhaseRetryableFailure, code: "ImagePullBackOff", kind: user},
		{name: "clock behind the kubelet", pod: testPod(corev1.PodPending, scheduled, started(0), notReady, waitingC("task", "ImagePullBackOff")),
			now: 0, phase: plugin.PhaseInitializing, recheck: 2 * time.Minute},
		{name: "zero grace setting uses the default", s: &plugin.Settings{}, pod: testPod(corev1.PodPending, scheduled, started(0), notReady, waitingC("task", "ImagePullBackOff")),
			now: 71 * time.Second, phase: plugin.PhaseInitializing, recheck: DefaultGracePeriod - time.Minute},
		{name: "negative grace fails at once", s: &plugin.Settings{ImagePullGracePeriod: -1}, pod: testPod(corev1.PodPending, scheduled, started(0), notReady, waitingC("task", "ImagePullBackOff")),
			now: 10 * time.Second, phase: plugin.PhaseRetryableFailure, code: "ImagePullBackOff", kind: user},
		{name: "main container grace counts from initialization", pod: testPod(corev1.PodPending, scheduled, started(0), notReady,
			cond(corev1.PodInitialized, corev1.ConditionTrue, "", "", 10*time.Minute), waitingC("task", "ImagePullBackOff")),
			now: 11*time.Minute + time.Second, phase: plugin.PhaseInitializing, recheck: time.Minute},
		{name: "create container error in grace", pod: testPod(corev1.PodPending, scheduled, started(0), notReady, waitingC("task", "CreateContainerError")),
			now: 71 * time.Second, phase: plugin.PhaseInitializing, recheck: 2 * time.Minute},
		{name: "create container error after grace is permanent", pod: testPod(corev1.PodPending, scheduled, started(0), notReady, waitingC("task", "CreateContainerError")),
			now: 4 * time.Minute, phase: plugin.PhasePermanentFailure, code: "CreateContainerError", kind: user},
		{name: "init container image pull", pod: testPod(corev1.PodPending, scheduled, started(0), notReady, initWaiting("init", "ImagePullBackOff"), waitingC("task", "PodInitializing")),
			now: 5 * time.Minute, phase: plugin.PhaseRetryableFailure, code: "ImagePullBackOff", kind: user, msg: "container init"},

		// Running.
		{name: "running", pod: testPod(corev1.PodRunning, scheduled, runningC("task", 20*time.Second)),
			phase: plugin.PhaseRunning, occurredAt: 20 * time.Second},
		// The primary container's end is the task's (Flyte's pod plugin):
		// finished, so that error.pb and the outputs are read, and lingering
		// while a sidecar runs, so that the pod is stopped.
		{name: "primary done, sidecar running: success", pod: testPod(corev1.PodRunning, termC("task", 0, "Completed", "", time.Minute), runningC("side", 0)),
			phase: plugin.PhaseSucceeded, finished: true, lingering: true, occurredAt: time.Minute},
		{name: "primary failed, sidecar running", pod: testPod(corev1.PodRunning, termC("task", 2, "Error", "boom", time.Minute), runningC("side", 0)),
			phase: plugin.PhaseRetryableFailure, code: "Error", kind: user, msg: "exit code 2: boom", finished: true, lingering: true, occurredAt: time.Minute},
		{name: "primary OOMKilled while running", pod: testPod(corev1.PodRunning, termC("task", 137, "OOMKilled", "", time.Minute), runningC("side", 0)),
			phase: plugin.PhaseRetryableFailure, code: CodeOOMKilled, kind: user, finished: true, lingering: true},
		{name: "primary done, sidecar running, conditions changed later: ended with the primary", pod: testPod(corev1.PodRunning, termC("task", 0, "Completed", "", time.Minute), runningC("side", 0),
			cond(corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", "", 4*time.Minute)),
			phase: plugin.PhaseSucceeded, finished: true, lingering: true, occurredAt: time.Minute},
		{name: "primary done, sidecar without a status yet: lingering", pod: testPod(corev1.PodRunning, termC("task", 0, "Completed", "", time.Minute)),
			phase: plugin.PhaseSucceeded, finished: true, lingering: true, occurredAt: time.Minute},
		{name: "primary and sidecar done, pod not updated yet: finished, not lingering", pod: testPod(corev1.PodRunning, termC("task", 0, "Completed", "", time.Minute), termC("side", 0, "Completed", "", 2*time.Minute)),
			phase: plugin.PhaseSucceeded, finished: true, occurredAt: time.Minute},
		{name: "primary done, native sidecar (init, restartPolicy Always) running: the kubelet stops it", pod: testPod(corev1.PodRunning, func(p *corev1.Pod) {
			always := corev1.ContainerRestartPolicyAlways
			p.Spec.Containers = p.Spec.Containers[:1]
			p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(0)}}}}
		}, termC("task", 0, "Completed", "", time.Minute)),
			phase: plugin.PhaseSucceeded, finished: true, occurredAt: time.Minute},
		{name: "primary running, sidecar done: running", pod: testPod(corev1.PodRunning, runningC("task", 0), termC("side", 0, "Completed", "", time.Minute)),
			phase: plugin.PhaseRunning},
		{name: "primary image pull fails beside a running sidecar", pod: testPod(corev1.PodRunning, started(0), runningC("side", 0), waitingC("task", "InvalidImageName")),
			phase: plugin.PhasePermanentFailure, code: "InvalidImageName", kind: user},

		// Succeeded.
		{name: "succeeded", pod: testPod(corev1.PodSucceeded, termC("task", 0, "Completed", "", time.Minute)),
			phase: plugin.PhaseSucceeded, finished: true},
		// A task ends when its container finished, not when the kubelet
		// later flips the pod's conditions: a task that finished at 1m30s
		// against a 2m deadline succeeded, however late Ready changed.
		{name: "succeeded: ended when the primary finished, not at the later condition change", pod: testPod(corev1.PodSucceeded, scheduled,
			termC("task", 0, "Completed", "", 90*time.Second), termC("side", 0, "Completed", "", 100*time.Second),
			cond(corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted", "", 150*time.Second), cond(corev1.PodReady, corev1.ConditionFalse, "PodCompleted", "", 150*time.Second)),
			phase: plugin.PhaseSucceeded, finished: true, occurredAt: 90 * time.Second},
		{name: "succeeded despite OOMKilled sidecar", pod: testPod(corev1.PodSucceeded, termC("task", 0, "Completed", "", time.Minute), termC("side", 0, "OOMKilled", "", time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: CodeOOMKilled, kind: user, msg: "side was OOMKilled", finished: true},

		// Failed.
		{name: "exit code with reason", pod: testPod(corev1.PodFailed, termC("task", 1, "Error", "Traceback: ValueError", time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: "Error", kind: user, msg: "ValueError", finished: true, occurredAt: time.Minute},
		{name: "failed: ended when the primary finished, not at the later condition change", pod: testPod(corev1.PodFailed,
			termC("task", 1, "Error", "", time.Minute), cond(corev1.PodReady, corev1.ConditionFalse, "PodFailed", "", 3*time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: "Error", kind: user, finished: true, occurredAt: time.Minute},
		{name: "exit code without reason", pod: testPod(corev1.PodFailed, termC("task", 3, "", "", time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: "ExitCode3", kind: user, msg: "exit code 3", finished: true},
		{name: "plain 137 without disruption is the task's", pod: testPod(corev1.PodFailed, termC("task", 137, "Error", "", time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: "Error", kind: user, finished: true},
		{name: "OOMKilled", pod: testPod(corev1.PodFailed, termC("task", 137, "OOMKilled", "", time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: CodeOOMKilled, kind: user, finished: true},
		{name: "OOMKilled wins over disruption", pod: testPod(corev1.PodFailed, cond("DisruptionTarget", corev1.ConditionTrue, "TerminationByKubelet", "", 2*time.Minute), termC("task", 137, "OOMKilled", "", time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: CodeOOMKilled, kind: user, finished: true},
		{name: "evicted", pod: testPod(corev1.PodFailed, podReasonIs("Evicted", "The node was low on resource: memory."), termC("task", 137, "Error", "", time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: CodeEvicted, kind: sys, msg: "low on resource", finished: true},
		{name: "node shutdown", pod: testPod(corev1.PodFailed, podReasonIs("NodeShutdown", "node is shutting down"), termC("task", 143, "Error", "", time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: CodeInterrupted, kind: sys, finished: true},
		{name: "shutdown", pod: testPod(corev1.PodFailed, podReasonIs("Shutdown", "")),
			phase: plugin.PhaseRetryableFailure, code: CodeInterrupted, kind: sys, finished: true},
		{name: "terminated", pod: testPod(corev1.PodFailed, podReasonIs("Terminated", "")),
			phase: plugin.PhaseRetryableFailure, code: CodeInterrupted, kind: sys, finished: true},
		{name: "preempting", pod: testPod(corev1.PodFailed, podReasonIs("Preempting", "")),
			phase: plugin.PhaseRetryableFailure, code: CodeInterrupted, kind: sys, finished: true},
		{name: "SIGKILL on a disrupted pod", pod: testPod(corev1.PodFailed, cond("DisruptionTarget", corev1.ConditionTrue, "PreemptionByScheduler", "preempted", time.Minute), termC("task", 137, "Error", "", 2*time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: CodeInterrupted, kind: sys, msg: "PreemptionByScheduler", finished: true},
		{name: "failure before the disruption is the task's", pod: testPod(corev1.PodFailed, cond("DisruptionTarget", corev1.ConditionTrue, "DeletionByTaintManager", "", 5*time.Minute), termC("task", 1, "Error", "", time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: "Error", kind: user, finished: true},
		{name: "primary exit 0 on a failed pod: success", pod: testPod(corev1.PodFailed, termC("task", 0, "Completed", "", time.Minute), termC("side", 1, "Error", "", 2*time.Minute)),
			phase: plugin.PhaseSucceeded, finished: true, occurredAt: time.Minute},
		{name: "init container failed", pod: testPod(corev1.PodFailed, initTerm("init", 2, "Error"), waitingC("task", "PodInitializing")),
			phase: plugin.PhaseRetryableFailure, code: "Error", kind: user, msg: "container init terminated with exit code 2", finished: true},
		{name: "deadline exceeded", pod: testPod(corev1.PodFailed, podReasonIs("DeadlineExceeded", "Pod was active on the node longer than the specified deadline")),
			phase: plugin.PhaseRetryableFailure, code: CodeDeadlineExceeded, kind: user, finished: true},
		{name: "kubelet admission", pod: testPod(corev1.PodFailed, podReasonIs("OutOfcpu", "Node didn't have enough resource: cpu")),
			phase: plugin.PhaseRetryableFailure, code: "OutOfcpu", kind: sys, finished: true},
		{name: "nothing recognisable", pod: testPod(corev1.PodFailed),
			phase: plugin.PhaseRetryableFailure, code: CodeUnknownError, kind: sys, finished: true, occurredAt: -1},
		{name: "unrecognised pod reason", pod: testPod(corev1.PodFailed, podReasonIs("Weird", "huh")),
			phase: plugin.PhaseRetryableFailure, code: CodeUnknownError, kind: sys, msg: "Weird: huh", finished: true},

		// Being deleted.
		{name: "running pod being deleted", pod: testPod(corev1.PodRunning, runningC("task", 0), deleting(time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: CodeResourceDeletedExternally, kind: sys, deletingObs: true},
		{name: "pending pod being deleted", pod: testPod(corev1.PodPending, scheduled, deleting(time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: CodeResourceDeletedExternally, kind: sys, deletingObs: true},
		{name: "killed by the deletion", pod: testPod(corev1.PodFailed, termC("task", 143, "Error", "", 90*time.Second), deleting(time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: CodeResourceDeletedExternally, kind: sys, finished: true, deletingObs: true},
		{name: "failed before the deletion", pod: testPod(corev1.PodFailed, termC("task", 1, "Error", "", 30*time.Second), deleting(time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: "Error", kind: user, finished: true, deletingObs: true},
		{name: "succeeded and being deleted", pod: testPod(corev1.PodSucceeded, termC("task", 0, "Completed", "", 90*time.Second), deleting(time.Minute)),
			phase: plugin.PhaseSucceeded, finished: true, deletingObs: true},
		{name: "evicted through the API while running", pod: testPod(corev1.PodRunning, runningC("task", 0), cond("DisruptionTarget", corev1.ConditionTrue, "EvictionByEvictionAPI", "", time.Minute), deleting(time.Minute)),
			phase: plugin.PhaseRetryableFailure, code: CodeInterrupted, kind: sys, deletingObs: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := s
			if tc.s != nil {
				set = *tc.s
			}
			orig := tc.pod.DeepCopy()
			got := ObservePod(tc.pod, t0.Add(tc.now), set)
			sameFromCache(t, tc.pod, got, func(p *corev1.Pod) plugin.Observation { return ObservePod(p, t0.Add(tc.now), set) })
			if got.Phase != tc.phase {
				t.Fatalf("phase = %s (%+v), want %s", got.Phase, got, tc.phase)
			}
			if tc.code == "" {
				if got.Error != nil {
					t.Errorf("error = %+v, want none", got.Error)
				}
			} else {
				if got.Error == nil {
					t.Fatalf("no error, want %s", tc.code)
				}
				if got.Error.Code != tc.code || got.Error.Kind != tc.kind || got.Error.Message == "" {
					t.Errorf("error = %+v, want code %s kind %s with a message", got.Error, tc.code, tc.kind)
				}
			}
			if !strings.Contains(got.Message, tc.msg) {
				t.Errorf("message = %q, want it to contain %q", got.Message, tc.msg)
			}
			if got.RecheckAfter != tc.recheck {
				t.Errorf("recheckAfter = %v, want %v", got.RecheckAfter, tc.recheck)
			}
			if got.Finished != tc.finished || got.Lingering != tc.lingering || got.Deleting != tc.deletingObs {
				t.Errorf("finished/lingering/deleting = %v/%v/%v, want %v/%v/%v", got.Finished, got.Lingering, got.Deleting,
					tc.finished, tc.lingering, tc.deletingObs)
			}
			switch {
			case tc.occurredAt < 0 && !got.OccurredAt.IsZero():
				t.Errorf("occurredAt = %v, want zero", got.OccurredAt)
			case tc.occurredAt > 0 && !got.OccurredAt.Equal(t0.Add(tc.occurredAt)):
				t.Errorf("occurredAt = %v, want %v", got.OccurredAt, t0.Add(tc.occurredAt))
			}
			if tc.pod.Status.Phase != orig.Status.Phase || len(tc.pod.Status.Conditions) != len(orig.Status.Conditions) {
				t.Errorf("ObservePod modified the pod")
			}
		})
	}
}

func TestPrimaryContainer(t *testing.T) {
	p := testPod(corev1.PodRunning)
	if primaryContainer(p) != "task" {
		t.Errorf("annotated")
	}
	p.Annotations = nil
	p.Spec.Containers = []corev1.Container{{Name: "a"}, {Name: "task"}}
	if primaryContainer(p) != "task" {
		t.Errorf("default name")
	}
	p.Spec.Containers = []corev1.Container{{Name: "a"}, {Name: "b"}}
	if primaryContainer(p) != "a" {
		t.Errorf("first")
	}
}

func TestMessagesAreBounded(t *testing.T) {
	long := strings.Repeat("é", 5000)
	got := ObservePod(testPod(corev1.PodFailed, termC("task", 1, "Error", long, time.Minute)), t0, plugin.Settings{})
	if len(got.Error.Message) > maxMessage || !strings.HasSuffix(got.Error.Message, "...") {
		t.Errorf("message of %d bytes", len(got.Error.Message))
	}
	if !strings.HasPrefix(got.Error.Message, "container task terminated with exit code 1: é") {
		t.Errorf("message = %.60q", got.Error.Message)
	}
}

// A pod whose Secret volume cannot be mounted (a missing Secret) stays
// Pending with its sandbox not ready, which the kubelet reports only as a
// FailedMount Event: it initializes within the grace period, then fails with
// a USER error naming the Secret.
func TestSecretMountStuck(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	optional := true
	stuck := func(optionalSecret bool, readyStatus corev1.ConditionStatus) *corev1.Pod {
		pod := &corev1.Pod{
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-creds"}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
				{Type: corev1.PodReadyToStartContainers, Status: readyStatus, LastTransitionTime: metav1.NewTime(t0)},
			}, ContainerStatuses: []corev1.ContainerStatus{{Name: "task", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}},
		}
		if optionalSecret {
			pod.Spec.Volumes[0].Secret.Optional = &optional
		}
		return pod
	}
	s := plugin.Settings{CreateContainerGracePeriod: 3 * time.Minute}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		after time.Duration
		want  plugin.Phase
	}{
		{"within the grace", stuck(false, corev1.ConditionFalse), time.Minute, plugin.PhaseInitializing},
		{"past the grace", stuck(false, corev1.ConditionFalse), 4 * time.Minute, plugin.PhasePermanentFailure},
		{"optional Secret", stuck(true, corev1.ConditionFalse), 4 * time.Minute, plugin.PhaseInitializing},
		{"sandbox ready (pulling the image)", stuck(false, corev1.ConditionTrue), 4 * time.Minute, plugin.PhaseInitializing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ObservePod(tc.pod, t0.Add(tc.after), s)
			sameFromCache(t, tc.pod, got, func(p *corev1.Pod) plugin.Observation { return ObservePod(p, t0.Add(tc.after), s) })
			if got.Phase != tc.want {
				t.Fatalf("phase %s (%s), want %s", got.Phase, got.Message, tc.want)
			}
			if tc.want == plugin.PhasePermanentFailure && (got.Error == nil || got.Error.Code != CodeSecretMountFailed ||
				got.Error.Kind != flytev1.ErrorKindUser || !strings.Contains(got.Error.Message, `"db-creds"`)) {
				t.Errorf("error %+v, want a USER SecretMountFailed naming db-creds", got.Error)
			}
			if tc.want == plugin.PhaseInitializing && tc.name == "within the grace" && got.RecheckAfter <= 0 {
				t.Errorf("no wake-up before the grace ends")
			}
		})
	}
}
