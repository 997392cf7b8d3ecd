package container

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

func TestTemplating(t *testing.T) {
	ta := testTA()
	ta.Name, ta.Spec.ActionName = "r1-a0", "a0"
	prefix1, prefix2 := task.OutputPrefix(ta, 1), task.OutputPrefix(ta, 2)
	if !strings.Contains(prefix1, "/run1/a0/1") {
		t.Fatalf("output prefix = %q", prefix1)
	}
	for _, tc := range []struct {
		name    string
		attempt int32
		in      string
		want    string
	}{
		{"input file", 1, "{{.input}}", "s3://bucket/run1/a0/inputs.pb"},
		{"input prefix, spaces and case", 1, "{{ .INPUTPREFIX }}", "s3://bucket/run1/a0"},
		{"dollar form", 1, "{{$OutputPrefix}}", prefix1},
		{"raw data is the output prefix", 2, "{{.rawOutputDataPrefix}}", prefix2},
		{"checkpoints", 2, "--ckpt={{.checkpointOutputPrefix}}", "--ckpt=" + prefix2 + "/_flytecheckpoints"},
		{"previous checkpoint", 2, "{{.prevCheckpointPrefix}}", prefix1 + "/_flytecheckpoints"},
		{"no previous checkpoint on the first attempt", 1, "{{.prevCheckpointPrefix}}", `""`},
		{"per-retry key", 2, "{{.perRetryUniqueKey}}", "r1_a0_1"},
		{"namespace", 1, "{{.namespace}}", "ns"},
		{"template path", 1, "{{.taskTemplatePath}}", "inline://taskTemplate"},
		{"a go-template passes through", 1, "kubectl get pods -o go-template='{{.metadata.name}}'", "kubectl get pods -o go-template='{{.metadata.name}}'"},
		{"flyte-sdk's run placeholders pass through", 1, "{{.runName}}/{{.actionName}}", "{{.runName}}/{{.actionName}}"},
		{"input values pass through", 1, "{{.Inputs.x}}", "{{.Inputs.x}}"},
		{"unknown names pass through", 1, "{{.nosuchthing}} {{ range . }}", "{{.nosuchthing}} {{ range . }}"},
		{"no space inside the dot form", 1, "{{. input}}", "{{. input}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := ta.DeepCopy()
			ta.Spec.Template.Container.Args = []string{tc.in}
			setPodSpec(t, ta, flytev1.PodTemplate{}, &corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", Image: "x", Command: []string{tc.in}}},
				Containers:     []corev1.Container{{Name: "side", Image: "x", Args: []string{tc.in}}},
			})
			pod := build(t, ta, tc.attempt, plugin.Settings{})
			for _, got := range []string{primaryOf(t, pod).Args[0], container(t, pod, "side").Args[0], pod.Spec.InitContainers[0].Command[0]} {
				if got != tc.want {
					t.Errorf("rendered %q = %q, want %q", tc.in, got, tc.want)
				}
			}
		})
	}
}

// {{.Inputs.x}} renders the input's value when the inputs were read; without
// them it stays as it is; an input the inputs lack is a task-specification error.
func TestInputPlaceholders(t *testing.T) {
	ta := testTA()
	ta.Spec.Template.Container.Args = []string{"--x={{.Inputs.x}}", "{{ $inputs.name }}", "{{.runName}}"}
	inputs := &core.LiteralMap{Literals: map[string]*core.Literal{
		"x":    {Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: 7}}}}}},
		"name": {Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: "ada"}}}}}},
	}}
	tc := plugin.TaskContext{TaskAction: ta, Task: decode(t, ta), Attempt: 1, Inputs: inputs}
	pod, err := BuildPod(tc)
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Containers[0].Args; !slices.Equal(got, []string{"--x=7", "ada", "{{.runName}}"}) {
		t.Errorf("args with inputs = %q", got)
	}

	tc.Inputs = nil
	if pod, err = BuildPod(tc); err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Containers[0].Args; !slices.Equal(got, ta.Spec.Template.Container.Args) {
		t.Errorf("args without inputs = %q, want them untouched", got)
	}

	tc.Inputs = &core.LiteralMap{}
	_, err = BuildPod(tc)
	var le *plugin.LaunchError
	if !errors.As(err, &le) || le.Retryable || !strings.Contains(le.Err.Message, "requested input is not found [x]") {
		t.Errorf("missing input: %v, want a permanent launch error naming x", err)
	}
}
