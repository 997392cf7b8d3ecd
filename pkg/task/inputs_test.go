package task_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/task"
)

func prim(p *core.Primitive) *core.Literal {
	return &core.Literal{Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: p}}}}
}

func TestInputValue(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 0, 0, 500, time.UTC)
	inputs := &core.LiteralMap{Literals: map[string]*core.Literal{
		"n":    prim(&core.Primitive{Value: &core.Primitive_Integer{Integer: -7}}),
		"b":    prim(&core.Primitive{Value: &core.Primitive_Boolean{Boolean: true}}),
		"f":    prim(&core.Primitive{Value: &core.Primitive_FloatValue{FloatValue: 2.5}}),
		"s":    prim(&core.Primitive{Value: &core.Primitive_StringValue{StringValue: "a b"}}),
		"t":    prim(&core.Primitive{Value: &core.Primitive_Datetime{Datetime: timestamppb.New(at)}}),
		"d":    prim(&core.Primitive{Value: &core.Primitive_Duration{Duration: durationpb.New(90 * time.Second)}}),
		"blob": {Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Blob{Blob: &core.Blob{Uri: "s3://b/x"}}}}},
		"list": {Value: &core.Literal_Collection{Collection: &core.LiteralCollection{Literals: []*core.Literal{
			prim(&core.Primitive{Value: &core.Primitive_Integer{Integer: 1}}), prim(&core.Primitive{Value: &core.Primitive_Integer{Integer: 2}})}}}},
		"map": {Value: &core.Literal_Map{Map: &core.LiteralMap{}}},
	}}
	for _, tc := range []struct{ name, want, err string }{
		{"n", "-7", ""}, {"b", "true", ""}, {"f", "2.5", ""}, {"s", "a b", ""},
		{"t", "2026-12-03T10:00:00.0000005Z", ""}, {"d", "1m30s", ""}, {"blob", "s3://b/x", ""}, {"list", "[1,2]", ""},
		{"map", "", "cannot be rendered"}, {"absent", "", "requested input is not found [absent]"},
	} {
		got, err := task.InputValue(inputs, tc.name)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %q, %v; want an error containing %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestReferencesInputs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--x", "{{.Inputs.x}}"}, true},
		{[]string{"--x={{ $inputs.x }}"}, true},
		{[]string{"{{.input}}", "{{.runName}}", "kubectl -o go-template='{{.metadata.name}}'"}, false},
	} {
		tk := &task.Task{Container: &task.Container{Args: tc.args}}
		if got := tk.ReferencesInputs(); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.args, got, tc.want)
		}
	}
}

// All of a pod's {{.Inputs.x}} render within MaxRenderedInputs together:
// neither a large input nor many placeholders of it (a 5,000-argument
// command) make the pod's text unbounded.
func TestInputRendererBoundsThePodsInputsTogether(t *testing.T) {
	str := func(n int) *core.Literal {
		return prim(&core.Primitive{Value: &core.Primitive_StringValue{StringValue: strings.Repeat("x", n)}})
	}
	many := make([]*core.Literal, task.MaxRenderedInputs)
	for i := range many {
		many[i] = str(0)
	}
	inputs := &core.LiteralMap{Literals: map[string]*core.Literal{
		"half":  str(task.MaxRenderedInputs/2 + 1),
		"small": str(10),
		"many":  {Value: &core.Literal_Collection{Collection: &core.LiteralCollection{Literals: many}}},
	}}
	r := task.NewInputRenderer(inputs)
	if _, err := r.Value("half"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Value("half"); err == nil || !strings.Contains(err.Error(), "exceed") {
		t.Errorf("a second half: %v, want the bound exceeded", err)
	}
	if v, err := r.Value("small"); err != nil || v != strings.Repeat("x", 10) {
		t.Errorf("what fits still renders: %q, %v", v, err)
	}
	if _, err := task.NewInputRenderer(inputs).Value("many"); err == nil {
		t.Error("a collection of 1 Mi empty strings (2 MiB of text) rendered")
	}
	if task.NewInputRenderer(nil) != nil {
		t.Error("a renderer without inputs")
	}
}
