package main

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/internal/kwokrig"
)

// Workloads: what the TaskActions look like.
const (
	// workloadTyped: the typed spec.template, no retries.
	workloadTyped = "typed"
	// workloadFlyte: spec.taskTemplate holding a serialized core.TaskTemplate
	// (a container task), with the fields and labels Flyte's control plane sets.
	workloadFlyte = "flyte"
	// workloadRetries: the typed form; a fraction has retries 1 and a first
	// attempt whose pod fails.
	workloadRetries = "retries"
)

// outcome is what the kwok Stages will make of a TaskAction's pods, and so
// what the harness expects of it.
type outcome struct {
	fail  bool // every attempt's pod fails: the TaskAction ends Failed
	retry bool // attempt 1's pod fails, attempt 2's succeeds (retries 1)
}

// attempts is how many pods the TaskAction should run.
func (oc outcome) attempts() int {
	if oc.retry {
		return 2
	}
	return 1
}

// outcomeOf spreads the failures and the retries evenly over the indices. A
// TaskAction chosen to fail is not also retried: the retries are spread over
// the others, so that the failed count stays fail fraction × N and the
// retried count is retry fraction × N (as far as the others allow).
func outcomeOf(o options, i int) outcome {
	oc := outcome{fail: wantFail(i, o.FailFraction)}
	if o.Workload != workloadRetries || oc.fail || o.FailFraction >= 1 {
		return oc
	}
	// i's index among the TaskActions that do not fail.
	j := i - int(math.Floor(float64(i+1)*o.FailFraction))
	oc.retry = wantFail(j, min(1, o.RetryFraction/(1-o.FailFraction)))
	return oc
}

// wantFail spreads the failures evenly: TaskAction i fails when the running
// count of failures steps up at i.
func wantFail(i int, f float64) bool {
	return math.Floor(float64(i+1)*f) > math.Floor(float64(i)*f)
}

// failMarker is the value of kwokrig.FailAnnotation for an outcome ("" for none).
func (oc outcome) failMarker() string {
	switch {
	case oc.fail:
		return kwokrig.FailEveryAttempt
	case oc.retry:
		return kwokrig.FailFirstAttempt
	}
	return ""
}

// workloadTaskAction is TaskAction i of the workload. bucket is the base URI
// of inputs and outputs (a file:// bucket the executor can read for the
// Flyte form; any URI for the typed form, which reads nothing).
func workloadTaskAction(o options, i int, bucket string) (*flytev1.TaskAction, outcome, error) {
	oc := outcomeOf(o, i)
	switch o.Workload {
	case workloadFlyte:
		ta, err := flyteTaskAction(i, oc, bucket)
		return ta, oc, err
	default:
		return typedTaskAction(i, oc, bucket), oc, nil
	}
}

func benchName(i int) string { return fmt.Sprintf("bench-%05d", i) }

// typedTaskAction is the typed form: spec.template, the fail marker on the
// pod template's annotations.
func typedTaskAction(i int, oc outcome, bucket string) *flytev1.TaskAction {
	name := benchName(i)
	tt := &flytev1.TypedTaskTemplate{
		ID:        flytev1.TaskID{Name: "bench", Version: "v1"},
		Container: &flytev1.Container{Image: "busybox:1.36", Command: []string{"true"}},
	}
	if m := oc.failMarker(); m != "" {
		tt.PodTemplate = &flytev1.PodTemplate{Annotations: map[string]string{kwokrig.FailAnnotation: m}}
	}
	if oc.retry {
		tt.Retries = 1
	}
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace},
		Spec: flytev1.TaskActionSpec{RunName: "bench", Project: "bench", Domain: "development",
			ActionName: name, TaskType: "container", Template: tt,
			InputURI: bucket + "/inputs/" + name + "/inputs.pb", RunOutputBase: bucket + "/outputs/bench"},
	}
}

// flyteTaskAction is a TaskAction as Flyte's actions service writes one for
// a child action of a run: the serialized container-task template with
// Flyte's argument placeholders, retries in its metadata, Flyte's labels, the
// run's env vars, and the input and output locations in the bucket. A
// container template carries no pod annotations, so the fail marker is a
// TaskAction annotation, which the executor copies onto the pod.
func flyteTaskAction(i int, oc outcome, bucket string) (*flytev1.TaskAction, error) {
	const run, project, domain = "rbench", "bench", "development"
	action := fmt.Sprintf("a%05d", i) // the name is taskActionName's
	retries := uint32(0)
	if oc.retry {
		retries = 1
	}
	b, err := proto.Marshal(&core.TaskTemplate{
		Id:       &core.Identifier{ResourceType: core.ResourceType_TASK, Project: project, Domain: domain, Name: "bench.work", Version: "v1"},
		Type:     "python",
		Metadata: &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: retries}, Runtime: &core.RuntimeMetadata{Type: core.RuntimeMetadata_FLYTE_SDK, Version: "2.0.0", Flavor: "python"}},
		Interface: &core.TypedInterface{Inputs: &core.VariableMap{Variables: []*core.VariableEntry{
			{Key: "x", Value: &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}}}}}},
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ghcr.io/flyteorg/flyte:py3.12-v2.0.0",
			Args: []string{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}", "--version", "v1",
				"--raw-data-path", "{{.rawOutputDataPrefix}}", "--checkpoint-path", "{{.checkpointOutputPrefix}}",
				"--prev-checkpoint", "{{.prevCheckpointPrefix}}", "--run-name", "{{.runName}}", "--name", "{{.actionName}}",
				"--tgz", bucket + "/code/bench.tgz", "--dest", ".", "mod", "bench", "instance", "work"},
			Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{
				{Name: core.Resources_CPU, Value: "250m"}, {Name: core.Resources_MEMORY, Value: "256Mi"}}},
		}},
	})
	if err != nil {
		return nil, err
	}
	parent := "a0"
	ta := &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: run + "-" + action, Namespace: benchNamespace, Labels: map[string]string{
			"flyte.org/project": project, "flyte.org/domain": domain, "flyte.org/run": run, "flyte.org/action": action,
			"flyte.org/action-type": "task", "flyte.org/is-root": "false",
		}},
		Spec: flytev1.TaskActionSpec{
			RunName: run, Project: project, Domain: domain, ActionName: action, ParentActionName: &parent,
			TaskType: "python", ShortName: "work", ActionType: flytev1.ActionTypeTask,
			InputURI:      bucket + "/" + project + "/" + domain + "/" + run + "/" + action + "/inputs.pb",
			RunOutputBase: bucket + "/" + project + "/" + domain + "/" + run + "/",
			TaskTemplate:  b, EnvVars: map[string]string{"_F_RUN": run, "LOG_LEVEL": "20"},
		},
	}
	if m := oc.failMarker(); m != "" {
		ta.Annotations = map[string]string{kwokrig.FailAnnotation: m}
	}
	return ta, nil
}

// taskActionName is the name of TaskAction i of the workload.
func taskActionName(o options, i int) string {
	if o.Workload == workloadFlyte {
		return fmt.Sprintf("rbench-a%05d", i)
	}
	return benchName(i)
}
