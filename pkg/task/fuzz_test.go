package task_test

import (
	"encoding/json"
	"testing"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/test/faults/badinput/hostile"
)

// FuzzTaskActionJSON: the typed decode. Whatever JSON a client stores, the
// TaskAction decodes within hostile.Bound without panicking (a JSON object
// always decodes: what the Go types cannot hold is recorded, not an error),
// and so does its task.
func FuzzTaskActionJSON(f *testing.F) {
	for _, d := range hostile.Documents() {
		f.Add(d.JSON)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		hostile.Within(t, "decoding a TaskAction", func() {
			var probe any
			isObject := json.Unmarshal(raw, &probe) == nil && func() bool { _, ok := probe.(map[string]any); return ok }()
			ta := &flytev1.TaskAction{}
			err := json.Unmarshal(raw, ta)
			if isObject && err != nil {
				t.Fatalf("a JSON object failed to decode: %v", err)
			}
			if err == nil {
				_, _ = task.FromTaskAction(ta)
				if de := ta.DecodeError(); de != nil {
					_ = de.Error()
				}
			}
		})
	})
}

// FuzzFlyteTemplate: the decode of Flyte's template. Whatever bytes
// spec.taskTemplate holds, they decode into a task or a field error within
// hostile.Bound, without panicking.
func FuzzFlyteTemplate(f *testing.F) {
	for _, q := range hostile.Quantities {
		f.Add(hostile.FlyteTemplate(q))
		f.Add(hostile.FlyteSharedMemoryTemplate(q))
		f.Add(hostile.FlytePodTemplate(q))
	}
	f.Add([]byte{0, 1, 2, 3, 4, 5})
	f.Add([]byte{0x0a, 0xff, 0xfe, 0xfb, 0x3e, 0xff})
	f.Fuzz(func(t *testing.T, tmpl []byte) {
		ta := &flytev1.TaskAction{Spec: flytev1.TaskActionSpec{RunName: "r", Project: "p", Domain: "d", ActionName: "a",
			TaskType: "python", RunOutputBase: "s3://b/r", TaskTemplate: tmpl}}
		hostile.Within(t, "decoding a Flyte template", func() {
			tk, err := task.FromTaskAction(ta)
			if err == nil && tk == nil {
				t.Fatal("no task and no error")
			}
		})
	})
}
