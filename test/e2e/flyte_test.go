package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/task"
)

// flyteAction is a TaskAction as Flyte's actions service applies it: the
// serialized template, Flyte's labels, the run's env vars and, for a child, an
// owner reference to its parent.
func flyteAction(t *testing.T, ns, run, action string, parent *flytev1.TaskAction, retries uint32) *flytev1.TaskAction {
	t.Helper()
	b, err := proto.Marshal(&core.TaskTemplate{
		Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "wf." + action, Version: "v1"},
		Type:     "python",
		Metadata: &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: retries}},
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ghcr.io/flyteorg/py:v1",
			Args:  []string{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}", "--run-name", "{{.runName}}"},
			Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{
				{Name: core.Resources_CPU, Value: "250m"}, {Name: core.Resources_MEMORY, Value: "256Mi"}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	name := run + "-" + action
	ta := &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			"flyte.org/project": "proj", "flyte.org/domain": "dev", "flyte.org/run": run, "flyte.org/action": action,
			"flyte.org/action-type": "task", "flyte.org/is-root": "false",
		}},
		Spec: flytev1.TaskActionSpec{
			RunName: run, Project: "proj", Domain: "dev", ActionName: action, TaskType: "python", ShortName: action,
			InputURI: "s3://b/proj/dev/" + run + "/" + action + "/inputs.pb", RunOutputBase: "s3://b/proj/dev/" + run + "/",
			TaskTemplate: b, EnvVars: map[string]string{"LOG_LEVEL": "10"},
		},
	}
	if parent == nil {
		ta.Labels["flyte.org/is-root"] = "true"
		ta.Spec.InputURI = "s3://b/proj/dev/" + run + "/" + action
	} else {
		p := parent.Spec.ActionName
		ta.Spec.ParentActionName = &p
		bod := true
		ta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "flyte.org/v1", Kind: "TaskAction", Name: parent.Name, UID: parent.UID, BlockOwnerDeletion: &bod}}
	}
	return ta
}

func TestFlyteWrittenTaskActions(t *testing.T) {
	s := startAll(t)
	const run = "rflyte"
	root := flyteAction(t, s.ns, run, "a0", nil, 0)
	create(t, root)

	// The root runs to success in the pod Flyte's runtime expects.
	pod := waitPod(t, s.ns, "rflyte-a0-0")
	c := pod.Spec.Containers[0]
	if c.Name != pod.Name || pod.Annotations["primary_container_name"] != pod.Name {
		t.Errorf("container %q, primary annotation %q: want both %q", c.Name, pod.Annotations["primary_container_name"], pod.Name)
	}
	for k, v := range map[string]string{"organization": "flyte", "project": "proj", "domain": "dev", "run": run, "action": "a0",
		"attempt": "1", "task-name": "wf.a0", "flyte.org/managed": "true", "flyte.org/is-root": "true"} {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	wantArgs := "a0 --inputs s3://b/proj/dev/rflyte/a0/inputs.pb --outputs-path " + task.OutputPrefix(root, 1) + " --run-name {{.runName}}"
	if got := strings.Join(c.Args, " "); got != wantArgs {
		t.Errorf("args = %q\nwant   %q", got, wantArgs)
	}
	if !strings.HasPrefix(task.OutputPrefix(root, 1), "s3://b/"+task.Shard(s.ns, root.Name)+"/proj/dev/rflyte/a0/1") {
		t.Errorf("output prefix %q is not Flyte's sharded layout", task.OutputPrefix(root, 1))
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for k, v := range map[string]string{"_U_ORG_NAME": "local", "_U_RUN_BASE": "s3://b/proj/dev/rflyte/", "RUN_NAME": run,
		"ACTION_NAME": "a0", "FLYTE_ATTEMPT_NUMBER": "0", "FLYTE_INTERNAL_TASK_NAME": "wf.a0", "LOG_LEVEL": "10"} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if q := c.Resources.Limits[corev1.ResourceMemory]; q.String() != "256Mi" {
		t.Errorf("resources = %+v", c.Resources)
	}
	kubelet(t, pod, corev1.PodSucceeded, 0)
	waitReason(t, s.ns, root.Name, flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	evs, _ := stored(t, s.events.Store, run, "a0")
	if last := evs[len(evs)-1]; last.OutputURI != task.OutputURI(root, 1) {
		t.Errorf("success event's outputs = %q, want %q", last.OutputURI, task.OutputURI(root, 1))
	}
	root = get(t, s.ns, root.Name)

	// A child fails on every attempt, then fails for good.
	failing := flyteAction(t, s.ns, run, "fail", root, 1)
	create(t, failing)
	for attempt := 0; attempt < 2; attempt++ {
		p := waitPod(t, s.ns, "rflyte-fail-"+string(rune('0'+attempt)))
		if p.Labels["attempt"] != string(rune('1'+attempt)) {
			t.Errorf("attempt label = %q", p.Labels["attempt"])
		}
		kubelet(t, p, corev1.PodFailed, 1)
	}
	if got := waitReason(t, s.ns, failing.Name, flytev1.ConditionFailed, flytev1.ReasonPermanentFailure); got.Status.Attempts != 2 {
		t.Errorf("attempts = %d, want 2", got.Status.Attempts)
	}

	// A child deleted while it runs is aborted: its pod goes away.
	aborted := flyteAction(t, s.ns, run, "abort", root, 0)
	create(t, aborted)
	p := waitPod(t, s.ns, "rflyte-abort-0")
	kubelet(t, p, corev1.PodRunning, 0)
	waitReason(t, s.ns, aborted.Name, flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	if err := k8s.Delete(context.Background(), get(t, s.ns, aborted.Name)); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the aborted TaskAction and its pod to go", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: aborted.Name}, &flytev1.TaskAction{})
		var cur corev1.Pod
		perr := k8s.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: p.Name}, &cur)
		return apierrors.IsNotFound(err) && (apierrors.IsNotFound(perr) || cur.DeletionTimestamp != nil)
	})
	if _, seq := stored(t, s.events.Store, run, "abort"); !strings.HasSuffix(seq, "ABORTED") {
		t.Errorf("events = %s, want an ABORTED last", seq)
	}
}
