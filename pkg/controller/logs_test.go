package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

// An attempt's events carry the configured log links rendered for its pod:
// the RUNNING and terminal events all of them, the QUEUED event only those
// shown while the pod is pending; every event names the pod and its primary
// container.
func TestEventsCarryLogLinks(t *testing.T) {
	rl, err := tasklog.New(config.TaskLogConfig{Templates: []config.TaskLogTemplate{
		{DisplayName: "Dashboard", TemplateURIs: []string{"https://logs.example/{{ .namespace }}/{{ .podName }}/{{ .containerName }}?attempt={{ .taskRetryAttempt }}"}},
		{DisplayName: "Live", TemplateURIs: []string{"https://live.example/{{ .podName }}"}, ShowWhilePending: true, HideOnceFinished: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ta := newTA(0)
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-0", Namespace: "ns", UID: "pod-1", CreationTimestamp: metav1.NewTime(t0),
			Annotations: map[string]string{task.PrimaryContainerConfigKey: "main"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar"}, {Name: "main"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(time.Second))}}}}},
	}
	pod.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
	pod.Spec.Containers[1].Image = "python:3.12"
	pod.Spec.Hostname = "host-1"
	logs, err := podLogs(rl, plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1}, pod)
	if err != nil {
		t.Fatal(err)
	}
	// The same from the pod as the informer cache keeps it.
	trimmed, _ := container.TrimPod(pod.DeepCopy())
	if fromCache, err := podLogs(rl, plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1}, trimmed.(*corev1.Pod)); err != nil || !sameLogs(fromCache, logs) {
		t.Errorf("log context and links from the cache's trimmed pod: %+v (%v), want %+v", fromCache, err, logs)
	}
	withLogs := func(r resource) resource { r.Logs = func() attemptLogs { return logs }; return r }

	launched := testDecider.decide(func() World {
		w := worldOf(t, ta, withLogs(ours("pod-1", t0, queuedObs())))
		w.Launch = &launchOutcome{}
		return w
	}(), t0)
	ta = applied(ta, launched)
	run := testDecider.decide(worldOf(t, ta, withLogs(ours("pod-1", t0, running(t0)))), t0.Add(2*time.Second))
	ta = applied(ta, run)
	done := testDecider.decide(worldOf(t, ta, withLogs(ours("pod-1", t0, succeeded(t0)))), t0.Add(3*time.Second))

	for _, c := range []struct {
		plan  Plan
		phase events.Phase
		want  string
	}{
		{launched, events.PhaseQueued, "Live=https://live.example/hello-0"},
		{run, events.PhaseRunning, "Dashboard=https://logs.example/ns/hello-0/main?attempt=0 Live=https://live.example/hello-0"},
		{done, events.PhaseSucceeded, "Dashboard=https://logs.example/ns/hello-0/main?attempt=0"},
	} {
		if len(c.plan.Events) != 1 || c.plan.Events[0].Phase != c.phase {
			t.Fatalf("want one %s event, got %s", c.phase, evs(c.plan.Events))
		}
		ev := c.plan.Events[0]
		var got []string
		for _, l := range ev.LogLinks {
			got = append(got, l.GetName()+"="+l.GetUri())
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s links = %q, want %q", c.phase, strings.Join(got, " "), c.want)
		}
		lc := ev.LogContext
		if c.phase == events.PhaseQueued {
			// The pod's creation is reported the same whenever it is computed:
			// without the context, which changes as the pod starts.
			if lc != nil {
				t.Errorf("QUEUED of the pod's creation has a log context: %v", lc)
			}
			continue
		}
		if lc.GetPrimaryPodName() != "hello-0" || len(lc.GetPods()) != 1 || lc.GetPods()[0].GetPrimaryContainerName() != "main" ||
			lc.GetPods()[0].GetNamespace() != "ns" || len(lc.GetPods()[0].GetContainers()) != 2 {
			t.Errorf("%s log context = %v", c.phase, lc)
		}
	}
}

func queuedObs() plugin.Observation { return plugin.Observation{Phase: plugin.PhaseQueued} }

// A Flyte-form template's own links (metadata.log_links) come first.
func TestFlyteTemplateLogLinks(t *testing.T) {
	rl, err := tasklog.New(config.TaskLogConfig{Templates: []config.TaskLogTemplate{{DisplayName: "Dashboard", TemplateURIs: []string{"https://logs.example/{{ .podName }}"}}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(&core.TaskTemplate{
		Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "p", Domain: "d", Name: "t", Version: "v1"},
		Type:     "python",
		Metadata: &core.TaskMetadata{LogLinks: []*core.TaskLog{{Name: "Trace", Uri: "https://trace.example/{{ .podName }}"}}},
		Target:   &core.TaskTemplate_Container{Container: &core.Container{Image: "img"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ta := newTA(0)
	ta.Spec.Template, ta.Spec.TaskTemplate = nil, b
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hello-0", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "hello-0"}}}}
	logs, err := podLogs(rl, plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1}, pod)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range logs.Links {
		got = append(got, l.GetName()+"="+l.GetUri())
	}
	if want := "Trace=https://trace.example/hello-0 Dashboard=https://logs.example/hello-0"; strings.Join(got, " ") != want {
		t.Errorf("links = %q, want %q", strings.Join(got, " "), want)
	}
}

func sameLogs(a, b attemptLogs) bool {
	if !proto.Equal(a.Context, b.Context) || len(a.Links) != len(b.Links) {
		return false
	}
	for i := range a.Links {
		if !proto.Equal(a.Links[i], b.Links[i]) {
			return false
		}
	}
	return true
}
