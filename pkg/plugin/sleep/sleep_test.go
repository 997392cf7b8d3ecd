package sleep

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

func durationVar(name string) *core.VariableEntry {
	return &core.VariableEntry{Key: name, Value: &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_DURATION}}}}
}

func flyteTask(t *testing.T, iface *core.TypedInterface) *task.Task {
	b, err := proto.Marshal(iface)
	if err != nil {
		t.Fatal(err)
	}
	return &task.Task{Form: task.FormFlyte, Interface: b}
}

func durationInputs(name string, d time.Duration) *core.LiteralMap {
	return &core.LiteralMap{Literals: map[string]*core.Literal{name: {Value: &core.Literal_Scalar{Scalar: &core.Scalar{
		Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Duration{Duration: durationpb.New(d)}}}}}}}}
}

// TestDuration: Flyte's rules for the one duration input (one input, typed
// as a duration, no outputs, a duration literal) and the typed form's config.
func TestDuration(t *testing.T) {
	one := &core.TypedInterface{Inputs: &core.VariableMap{Variables: []*core.VariableEntry{durationVar("d")}}}
	for _, tc := range []struct {
		name   string
		t      *task.Task
		inputs *core.LiteralMap
		want   time.Duration
		err    string
	}{
		{"Flyte: one duration input", flyteTask(t, one), durationInputs("d", 3*time.Second), 3 * time.Second, ""},
		{"Flyte: zero", flyteTask(t, one), durationInputs("d", 0), 0, ""},
		{"Flyte: no input declared", flyteTask(t, &core.TypedInterface{}), nil, 0, "exactly one duration input"},
		{"Flyte: two inputs", flyteTask(t, &core.TypedInterface{Inputs: &core.VariableMap{Variables: []*core.VariableEntry{durationVar("a"), durationVar("b")}}}), nil, 0, "exactly one"},
		{"Flyte: an output", flyteTask(t, &core.TypedInterface{Inputs: one.Inputs, Outputs: &core.VariableMap{Variables: []*core.VariableEntry{durationVar("o")}}}), durationInputs("d", time.Second), 0, "no outputs"},
		{"Flyte: input of another type", flyteTask(t, &core.TypedInterface{Inputs: &core.VariableMap{Variables: []*core.VariableEntry{{Key: "d", Value: &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}}}}}}), nil, 0, "typed as a duration"},
		{"Flyte: value missing", flyteTask(t, one), &core.LiteralMap{}, 0, "missing"},
		{"Flyte: negative", flyteTask(t, one), durationInputs("d", -time.Second), 0, "negative"},
		{"Flyte: a year", flyteTask(t, one), durationInputs("d", 365*24*time.Hour), 0, "at most"},
		{"typed: config", &task.Task{Config: map[string]string{ConfigKey: "1m30s"}}, nil, 90 * time.Second, ""},
		{"typed: no config", &task.Task{}, nil, 0, "spec.template.config.duration is required"},
		{"typed: not a duration", &task.Task{Config: map[string]string{ConfigKey: "soon"}}, nil, 0, "invalid duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Duration(tc.t, tc.inputs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestObserve: running until the duration has passed since the ConfigMap's
// creation, with a recheck at its end; then succeeded as of that moment.
func TestObserve(t *testing.T) {
	start := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "s-0", CreationTimestamp: metav1.NewTime(start)}, Data: map[string]string{durationKey: "10s"}}
	if obs := observe(cm, start.Add(4*time.Second)); obs.Phase != plugin.PhaseRunning || obs.RecheckAfter != 6*time.Second || obs.Finished {
		t.Errorf("4s in: %+v", obs)
	}
	if obs := observe(cm, start.Add(time.Hour)); obs.Phase != plugin.PhaseSucceeded || !obs.Finished || !obs.OccurredAt.Equal(start.Add(10*time.Second)) {
		t.Errorf("an hour later: %+v; want succeeded at the duration's end", obs)
	}
	cm.Data[durationKey] = "forever"
	if obs := observe(cm, start); obs.Phase != plugin.PhasePermanentFailure || obs.Error == nil {
		t.Errorf("a duration changed by someone else: %+v", obs)
	}
}
