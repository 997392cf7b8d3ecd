package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
)

func TestSystemBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int32
		want time.Duration
	}{{1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second}, {10, 5 * time.Minute}, {100, 5 * time.Minute}} {
		if got := systemBackoff(10*time.Second, tc.n); got != tc.want {
			t.Errorf("systemBackoff(10s, %d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

func TestNextVersion(t *testing.T) {
	for _, tc := range []struct {
		name    string
		old     flytev1.TaskActionStatus
		attempt int32
		want    int32
	}{
		{"first event", flytev1.TaskActionStatus{}, 1, 0},
		{"same attempt", flytev1.TaskActionStatus{Attempts: 1, PluginPhase: "Queued", PluginPhaseVersion: 0}, 1, 1},
		{"same attempt later", flytev1.TaskActionStatus{Attempts: 1, PluginPhase: "Running", PluginPhaseVersion: 4}, 1, 5},
		{"new attempt", flytev1.TaskActionStatus{Attempts: 1, PluginPhase: "Running", PluginPhaseVersion: 4}, 2, 0},
	} {
		if got := nextVersion(tc.old, tc.attempt); got != tc.want {
			t.Errorf("%s: nextVersion = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestEventPhase(t *testing.T) {
	for _, tc := range []struct {
		t    transition
		want events.Phase
	}{
		{transition{phase: plugin.PhaseQueued}, events.PhaseQueued},
		{transition{phase: plugin.PhaseWaitingForResources}, events.PhaseWaitingForResources},
		{transition{phase: plugin.PhaseInitializing}, events.PhaseInitializing},
		{transition{phase: plugin.PhaseRunning}, events.PhaseRunning},
		{transition{phase: plugin.PhaseSucceeded, final: true}, events.PhaseSucceeded},
		{transition{phase: plugin.PhaseRetryableFailure}, events.PhaseFailed},
		{transition{phase: plugin.PhasePermanentFailure, final: true, reason: flytev1.ReasonPermanentFailure}, events.PhaseFailed},
		{transition{phase: plugin.PhaseRetryableFailure, final: true, reason: flytev1.ReasonTimedOut}, events.PhaseTimedOut},
		{transition{phase: plugin.PhasePermanentFailure, final: true, reason: flytev1.ReasonAborted}, events.PhaseAborted},
	} {
		if got := eventPhase(tc.t); got != tc.want {
			t.Errorf("eventPhase(%+v) = %s, want %s", tc.t, got, tc.want)
		}
	}
}

func TestApplyTransition(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &flytev1.TaskActionStatus{}
	applyTransition(st, transition{phase: plugin.PhaseQueued, message: "pod created", at: t0}, 1)
	applyTransition(st, transition{phase: plugin.PhaseQueued, message: "Unschedulable", at: t0.Add(time.Second)}, 1)
	applyTransition(st, transition{phase: plugin.PhaseRunning, at: t0.Add(2 * time.Second)}, 1)
	if len(st.PhaseHistory) != 2 || st.PhaseHistory[0].Phase != "Queued" || st.PhaseHistory[1].Phase != "Executing" {
		t.Fatalf("phaseHistory = %+v", st.PhaseHistory)
	}
	c := meta.FindStatusCondition(st.Conditions, flytev1.ConditionProgressing)
	// Progressing stayed True: its lastTransitionTime is that of the first transition.
	if c.Reason != flytev1.ReasonExecuting || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("Progressing = %+v", c)
	}
	done := t0.Add(3 * time.Second)
	applyTransition(st, transition{phase: plugin.PhaseSucceeded, at: done, final: true, reason: flytev1.ReasonCompleted}, 1)
	c = meta.FindStatusCondition(st.Conditions, flytev1.ConditionProgressing)
	s := meta.FindStatusCondition(st.Conditions, flytev1.ConditionSucceeded)
	if c.Status != metav1.ConditionFalse || !c.LastTransitionTime.Time.Equal(done) || s.Status != metav1.ConditionTrue || !s.LastTransitionTime.Time.Equal(done) {
		t.Errorf("conditions after success = %+v", st.Conditions)
	}
	if st.CompletedAt == nil || !st.CompletedAt.Time.Equal(done) {
		t.Errorf("completedAt = %v", st.CompletedAt)
	}

	failed := &flytev1.TaskActionStatus{}
	applyTransition(failed, transition{phase: plugin.PhasePermanentFailure, at: done, final: true, reason: flytev1.ReasonTimedOut,
		err: &plugin.ExecError{Code: "Timeout", Kind: flytev1.ErrorKindUser, Message: "too slow"}}, 1)
	f := meta.FindStatusCondition(failed.Conditions, flytev1.ConditionFailed)
	if f == nil || f.Reason != flytev1.ReasonTimedOut || f.Message != "too slow" || failed.ErrorState.Code != "Timeout" {
		t.Errorf("timed out: %+v %+v", f, failed.ErrorState)
	}
	if h := failed.PhaseHistory; len(h) != 1 || h[0].Phase != flytev1.ReasonTimedOut {
		t.Errorf("history = %+v", h)
	}
}

func TestValidateSpec(t *testing.T) {
	full := flytev1.TaskActionSpec{RunName: "r", Project: "p", Domain: "d", ActionName: "a", TaskType: "container",
		InputURI: "s3://i", RunOutputBase: "s3://o", Template: &flytev1.TypedTaskTemplate{Container: &flytev1.Container{Image: "img"}}}
	for _, tc := range []struct {
		name   string
		mutate func(*flytev1.TaskActionSpec)
		want   string
	}{
		{"valid", func(*flytev1.TaskActionSpec) {}, ""},
		{"no template", func(s *flytev1.TaskActionSpec) { s.Template = nil }, "taskTemplate"},
		{"no container", func(s *flytev1.TaskActionSpec) { s.Template = &flytev1.TypedTaskTemplate{} }, "template.container"},
		{"several", func(s *flytev1.TaskActionSpec) { s.InputURI, s.RunOutputBase, s.TaskType = "", "", "" }, "taskType,inputUri,runOutputBase"},
		{"identity", func(s *flytev1.TaskActionSpec) { s.Project, s.Domain = "", "" }, "project,domain"},
	} {
		s := *full.DeepCopy()
		tc.mutate(&s)
		got := strings.Join(validateSpec(&flytev1.TaskAction{Spec: s}), ",")
		if got != tc.want {
			t.Errorf("%s: missing = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestWriteTracker(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	w := newWriteTracker(clk)
	k := types.NamespacedName{Namespace: "n", Name: "a"}
	if w.stale(k, "1") {
		t.Error("stale without a write")
	}
	w.wrote(k, "5")
	if !w.stale(k, "4") {
		t.Error("a cache at 4 after our write at 5 must be stale")
	}
	if w.ours(k, "6") {
		t.Error("6 is not our write")
	}
	if !w.ours(k, "5") {
		t.Error("5 is our write")
	}
	if w.stale(k, "4") {
		t.Error("after the echo of our write nothing is stale")
	}
	w.wrote(k, "7")
	w.wrote(k, "8")
	if !w.ours(k, "7") || !w.stale(k, "7") {
		t.Error("7 is our earlier write: its echo is ours, and a cache at 7 is older than our write at 8")
	}
	if !w.ours(k, "8") || w.stale(k, "8") {
		t.Error("8 is our latest write")
	}
	w.wrote(k, "9")
	clk.Step(staleWindow + time.Second)
	if w.stale(k, "4") {
		t.Error("the stale window must expire")
	}
}

func TestMetaPatch(t *testing.T) {
	ta := func(labels map[string]string, fins ...string) *flytev1.TaskAction {
		return &flytev1.TaskAction{ObjectMeta: metav1.ObjectMeta{Labels: labels, Finalizers: fins}}
	}
	for _, tc := range []struct {
		name     string
		old, new *flytev1.TaskAction
		want     string
	}{
		{"nothing", ta(nil, "f"), ta(nil, "f"), ""},
		{"add first finalizer", ta(nil), ta(nil, "f"), `add /metadata/finalizers [f]`},
		{"remove finalizer", ta(nil, "x", "f"), ta(nil, "x"), `test /metadata/finalizers [x f]; add /metadata/finalizers [x]`},
		{"labels onto none", ta(nil), ta(map[string]string{"a/b": "1"}), `add /metadata/labels map[a/b:1]`},
		{"escaped label key", ta(map[string]string{"team": "ml"}), ta(map[string]string{"team": "ml", "flyte.org/x~y": "v"}), `add /metadata/labels/flyte.org~1x~0y v`},
	} {
		var got []string
		for _, op := range metaPatch(tc.old, tc.new) {
			got = append(got, fmt.Sprintf("%s %s %v", op.Op, op.Path, op.Value))
		}
		if g := strings.Join(got, "; "); g != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, g, tc.want)
		}
	}
}
