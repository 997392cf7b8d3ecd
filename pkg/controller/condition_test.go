package controller

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	workflowpb "github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/pkg/task"
)

func TestConditionTimeoutDecode(t *testing.T) {
	enc := func(c *workflowpb.ConditionAction) []byte {
		b, err := proto.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		spec  []byte
		want  time.Duration
		field string
	}{
		{"none", nil, 0, ""},
		{"no timeout", enc(&workflowpb.ConditionAction{Name: "approve"}), 0, ""},
		{"timeout", enc(&workflowpb.ConditionAction{Name: "approve", Timeout: durationpb.New(90 * time.Second)}), 90 * time.Second, ""},
		{"negative timeout", enc(&workflowpb.ConditionAction{Timeout: durationpb.New(-time.Second)}), 0, "spec.conditionSpec.timeout"},
		{"not a ConditionAction", []byte{0xff, 0xff, 0xff}, 0, "spec.conditionSpec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := conditionTimeout(tc.spec)
			var fe *task.FieldError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			case got != tc.want:
				t.Errorf("timeout %v, want %v", got, tc.want)
			}
		})
	}
}

func newCondition() *flytev1.TaskAction {
	ta := newTA(0)
	ta.Finalizers = nil
	ta.Spec.ActionType = flytev1.ActionTypeCondition
	ta.Spec.Template = nil
	return ta
}

// TestConditionAction is issue 11, item 4: no pod; Paused until the actions
// service writes the signal into the status, then Succeeded (Signaled), or
// TimedOut at the condition's timeout. No events: Flyte's executor sends none
// for a condition, and its runs service would list an attempt for them.
func TestConditionAction(t *testing.T) {
	signalled := metav1.NewTime(t0.Add(30 * time.Second))
	ta := newCondition()
	w := World{TA: ta, ConditionTimeout: time.Hour}
	p := testDecider.decide(w, t0.Add(time.Second))
	if len(p.Events) != 0 || history(p.Status) != "Paused" || findReason(p.Status.Conditions, flytev1.ConditionProgressing) != flytev1.ReasonPaused {
		t.Fatalf("first look: events %s history %s conditions %+v", evs(p.Events), history(p.Status), p.Status.Conditions)
	}
	if p.Launch || p.AddFinalizer || p.WakeAfter != min(testDecider.Safety, time.Hour-time.Second) {
		t.Errorf("launch %v, finalizer %v, wake %v; want no pod, no finalizer, wake at the timeout", p.Launch, p.AddFinalizer, p.WakeAfter)
	}
	paused := applied(ta, p)
	w.TA = paused
	if p := testDecider.decide(w, t0.Add(time.Minute)); len(p.Events) != 0 || !equalStatus(paused.Status, p.Status) {
		t.Errorf("still paused: events %s, status changed %v", evs(p.Events), !equalStatus(paused.Status, p.Status))
	}

	// The actions service writes the signal with a full status update.
	sig := paused.DeepCopy()
	sig.Status.SignalValue, sig.Status.SignalledBy, sig.Status.SignalledAt = []byte{1}, "alice", &signalled
	p = testDecider.decide(World{TA: sig, ConditionTimeout: time.Hour}, t0.Add(time.Minute))
	if len(p.Events) != 0 || findReason(p.Status.Conditions, flytev1.ConditionSucceeded) != flytev1.ReasonSignaled || !p.Status.IsTerminal() {
		t.Errorf("signalled: events %s conditions %+v finish %v", evs(p.Events), p.Status.Conditions, p.Status.IsTerminal())
	}
	if string(p.Status.SignalValue) != "\x01" || p.Status.SignalledBy != "alice" {
		t.Errorf("the signal was not kept: %+v", p.Status)
	}

	// No signal by the timeout.
	p = testDecider.decide(World{TA: paused, ConditionTimeout: time.Hour}, t0.Add(time.Hour))
	if len(p.Events) != 0 || findReason(p.Status.Conditions, flytev1.ConditionFailed) != flytev1.ReasonTimedOut {
		t.Errorf("timeout: events %s conditions %+v", evs(p.Events), p.Status.Conditions)
	}

	// An unreadable conditionSpec fails it, naming the field.
	p = testDecider.decide(World{TA: newCondition(), SpecErr: &task.FieldError{Field: "spec.conditionSpec", Reason: "bad"}}, t0)
	if findReason(p.Status.Conditions, flytev1.ConditionFailed) != flytev1.ReasonInvalidSpec {
		t.Errorf("bad spec: conditions %+v", p.Status.Conditions)
	}
}
