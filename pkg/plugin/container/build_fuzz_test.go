package container_test

import (
	"encoding/json"
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
