package container_test

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/test/faults/badinput/hostile"
)

// fuzzInputs are serialized core.LiteralMaps for {{.Inputs.x}}: a string,
// and a collection nested deep.
func fuzzInputs() [][]byte {
	str := &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
		Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: "v"}}}}}}
	nested := str
	for range 200 {
		nested = &core.Literal{Value: &core.Literal_Collection{Collection: &core.LiteralCollection{Literals: []*core.Literal{nested, str}}}}
	}
	var out [][]byte
	for _, l := range []*core.Literal{str, nested} {
		b, err := proto.Marshal(&core.LiteralMap{Literals: map[string]*core.Literal{"x": l}})
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return append(out, nil)
}

// FuzzBuildPod: the pod build. Whatever TaskAction a client stores (and
// whatever inputs its command renders), the pod is built or refused with an
// error within hostile.Bound, without panicking.
func FuzzBuildPod(f *testing.F) {
	inputs := fuzzInputs()
	for i, d := range hostile.Documents() {
		f.Add(d.JSON, inputs[i%len(inputs)])
	}
	settings := plugin.Settings{DefaultCPU: "100m", DefaultMemory: "128Mi", GPUResourceName: "nvidia.com/gpu"}
	f.Fuzz(func(t *testing.T, raw, in []byte) {
		hostile.Within(t, "building a pod", func() {
			ta := &flytev1.TaskAction{}
			if json.Unmarshal(raw, ta) != nil {
				return
			}
			ta.Name, ta.Namespace, ta.UID = "fuzz", "ns", "uid"
			tk, err := task.FromTaskAction(ta)
			if err != nil {
				return
			}
			tc := plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: settings}
			if len(in) > 0 {
				lm := &core.LiteralMap{}
				if proto.Unmarshal(in, lm) == nil {
					tc.Inputs = lm
				}
			}
			if pod, err := container.BuildPod(tc); err == nil && pod == nil {
				t.Fatal("no pod and no error")
			}
		})
	})
}

// A command of 5,000 {{.Inputs.x}} of a 1 KiB input would render 5 MB into
// the pod: the build refuses it, naming the bound, instead of building it.
func TestBuildPodBoundsRenderedInputs(t *testing.T) {
	ta := &flytev1.TaskAction{}
	doc := hostile.TaskAction("ns", "inputs")
	args := make([]any, 5000)
	for i := range args {
		args[i] = "{{.Inputs.x}}"
	}
	hostile.Container(doc)["args"] = args
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, ta); err != nil {
		t.Fatal(err)
	}
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	value := &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{
		Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: strings.Repeat("v", 1024)}}}}}}
	tc := plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Inputs: &core.LiteralMap{Literals: map[string]*core.Literal{"x": value}}}
	pod, err := container.BuildPod(tc)
	if err == nil {
		size := 0
		for _, c := range pod.Spec.Containers {
			for _, a := range c.Args {
				size += len(a)
			}
		}
		t.Fatalf("built a pod whose args are %d bytes", size)
	}
	if !strings.Contains(err.Error(), "exceed") {
		t.Errorf("error %v, want it to name the bound", err)
	}
	// Fewer, within the bound, render.
	hostile.Container(doc)["args"] = args[:100]
	raw, _ = json.Marshal(doc)
	ta = &flytev1.TaskAction{}
	_ = json.Unmarshal(raw, ta)
	tc.TaskAction = ta
	if tc.Task, err = task.FromTaskAction(ta); err != nil {
		t.Fatal(err)
	}
	if _, err := container.BuildPod(tc); err != nil {
		t.Errorf("100 of them: %v", err)
	}
}
