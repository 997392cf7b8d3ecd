package container

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

func envMap(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := out[e.Name]; dup {
			panic("duplicate env " + e.Name)
		}
		out[e.Name] = e
	}
	return out
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}

func TestEnv(t *testing.T) {
	ta := testTA()
	ta.Spec.Template.Container.Env = []corev1.EnvVar{{Name: "A", Value: "template"}, {Name: "FLYTE_ATTEMPT_NUMBER", Value: "template"}, {Name: "D", Value: "template"}}
	ta.Spec.EnvVars = map[string]string{"B": "run", "ACTION_NAME": "spoof", "_U_RUN_BASE": "spoof", "D": "run"}
	setPodSpec(t, ta, flytev1.PodTemplate{}, &corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
		Containers:     []corev1.Container{{Name: "side", Image: "envoy", Env: []corev1.EnvVar{{Name: "S", Value: "side"}}}},
	})
	s := plugin.Settings{DefaultEnvVars: map[string]string{"_U_EP_OVERRIDE": "dns:///flyte:8089", "D": "default"}}
	pod := build(t, ta, 3, s)
	p := primaryOf(t, pod)
	wantOrder := []string{"A", "FLYTE_ATTEMPT_NUMBER", "D", "FLYTE_INTERNAL_EXECUTION_ID", "FLYTE_INTERNAL_EXECUTION_PROJECT",
		"FLYTE_INTERNAL_EXECUTION_DOMAIN", "_F_PN", "FLYTE_INTERNAL_TASK_PROJECT", "FLYTE_INTERNAL_TASK_DOMAIN",
		"FLYTE_INTERNAL_TASK_NAME", "FLYTE_INTERNAL_TASK_VERSION", "FLYTE_INTERNAL_PROJECT", "FLYTE_INTERNAL_DOMAIN",
		"FLYTE_INTERNAL_NAME", "FLYTE_INTERNAL_VERSION", "ACTION_NAME", "RUN_NAME", "_U_RUN_BASE", "_U_ORG_NAME", "B", "_U_EP_OVERRIDE"}
	if got := envNames(p); !reflect.DeepEqual(got, wantOrder) {
		t.Errorf("env order = %v\nwant        %v", got, wantOrder)
	}
	env := envMap(p)
	for k, v := range map[string]string{
		"A": "template", "FLYTE_ATTEMPT_NUMBER": "2", "D": "default", "FLYTE_INTERNAL_EXECUTION_ID": "run1",
		"FLYTE_INTERNAL_EXECUTION_PROJECT": "proj", "FLYTE_INTERNAL_TASK_PROJECT": "proj", "FLYTE_INTERNAL_NAME": "my.task",
		"FLYTE_INTERNAL_VERSION": "v1", "ACTION_NAME": "a0", "RUN_NAME": "run1", "_U_RUN_BASE": "s3://bucket/run1/",
		"_U_ORG_NAME": "local", "B": "run", "_U_EP_OVERRIDE": "dns:///flyte:8089",
	} {
		if env[k].Value != v {
			t.Errorf("%s = %q, want %q", k, env[k].Value, v)
		}
	}
	if f := env["_F_PN"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("_F_PN = %+v", env["_F_PN"])
	}
	// Every container of the pod gets the task's environment.
	for _, c := range append(pod.Spec.InitContainers, container(t, pod, "side")) {
		if e := envMap(c); e["RUN_NAME"].Value != "run1" || e["FLYTE_ATTEMPT_NUMBER"].Value != "2" {
			t.Errorf("container %s env = %v", c.Name, envNames(c))
		}
	}
	if e := envMap(container(t, pod, "side")); e["S"].Value != "side" {
		t.Errorf("sidecar lost its own env")
	}
	// Without a task identity there are no FLYTE_INTERNAL_TASK_* variables.
	anon := testTA()
	anon.Spec.Template.ID = flytev1.TaskID{}
	anon.Spec.Project, anon.Spec.Domain = "", ""
	tk := decode(t, anon)
	tk.ID = task.Identifier{}
	pod, err := BuildPod(plugin.TaskContext{TaskAction: anon, Task: tk, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := envMap(pod.Spec.Containers[0])["FLYTE_INTERNAL_TASK_NAME"]; ok {
		t.Error("FLYTE_INTERNAL_TASK_NAME without a task identity")
	}
}

// TestMergeEnv: a later definition replaces an earlier one in its first
// place, for a few names and for many, and the result shares nothing mutable
// with its layers.
func TestMergeEnv(t *testing.T) {
	ref := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: key}}
	}
	base := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: ref("status.podIP")}, {Name: "C", Value: "3"}}
	over := []corev1.EnvVar{{Name: "B", Value: "2"}, {Name: "D", Value: "4"}, {Name: "A", Value: "one"}}
	want := []corev1.EnvVar{{Name: "A", Value: "one"}, {Name: "B", Value: "2"}, {Name: "C", Value: "3"}, {Name: "D", Value: "4"}}
	if got := MergeEnv(base, over); !reflect.DeepEqual(got, want) {
		t.Errorf("MergeEnv = %v, want %v", got, want)
	}
	if got := MergeEnv(nil, []corev1.EnvVar{}); got != nil {
		t.Errorf("MergeEnv of nothing = %v, want nil", got)
	}

	got := MergeEnv(base)
	got[1].ValueFrom.FieldRef.FieldPath = "changed"
	if base[1].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Error("MergeEnv's result shares a ValueFrom with its layer")
	}

	// Many names: the same rule.
	var many, manyOver, manyWant []corev1.EnvVar
	for i := range 200 {
		name := fmt.Sprintf("V%03d", i)
		many = append(many, corev1.EnvVar{Name: name, Value: "old"})
		v := "old"
		if i%3 == 0 {
			manyOver = append(manyOver, corev1.EnvVar{Name: name, Value: "new"})
			v = "new"
		}
		manyWant = append(manyWant, corev1.EnvVar{Name: name, Value: v})
	}
	manyOver = append(manyOver, corev1.EnvVar{Name: "LAST", Value: "x"})
	manyWant = append(manyWant, corev1.EnvVar{Name: "LAST", Value: "x"})
	if got := MergeEnv(many, manyOver); !reflect.DeepEqual(got, manyWant) {
		t.Errorf("MergeEnv of many: got %d vars, first diff not shown; want %d", len(got), len(manyWant))
	}
}
