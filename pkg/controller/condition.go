package controller

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	flytev1 "github.com/taskaction/executor/api/v1"
	workflowpb "github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// phasePaused is the plugin phase recorded while a condition waits.
const phasePaused plugin.Phase = "Paused"

// conditionTimeout decodes how long a condition action waits for its signal
// from spec.conditionSpec, Flyte's serialized workflow.ConditionAction
// (0: no limit). Bad bytes name the field.
func conditionTimeout(spec []byte) (time.Duration, error) {
	if len(spec) == 0 {
		return 0, nil
	}
	var c workflowpb.ConditionAction
	if err := proto.Unmarshal(spec, &c); err != nil {
		return 0, &task.FieldError{Field: "spec.conditionSpec", Reason: fmt.Sprintf("is not a serialized ConditionAction: %v", err)}
	}
	if c.GetTimeout() == nil {
		return 0, nil
	}
	if err := c.GetTimeout().CheckValid(); err != nil {
		return 0, &task.FieldError{Field: "spec.conditionSpec.timeout", Reason: err.Error()}
	}
	d := c.GetTimeout().AsDuration()
	if d < 0 {
		return 0, &task.FieldError{Field: "spec.conditionSpec.timeout", Reason: fmt.Sprintf("must not be negative, got %v", d)}
	}
	return d, nil
}

// condition advances a condition action: no pod; it is Paused until the
// actions service writes its signal into the status, then Succeeded with
// reason Signaled, or TimedOut once its timeout (counted from its creation)
// has passed.
func (d decider) condition(p *Plan, w World, now time.Time) {
	st := &p.Status
	if w.SpecErr != nil {
		d.fail(p, w, now, 1, flytev1.ReasonInvalidSpec, CodeInvalidSpec, EventFailedValidation, w.SpecErr.Error())
		return
	}
	if st.SignalledAt != nil || st.SignalledBy != "" || len(st.SignalValue) > 0 {
		at := now
		if st.SignalledAt != nil && !st.SignalledAt.After(now) {
			at = st.SignalledAt.Time
		}
		msg := "signalled"
		if st.SignalledBy != "" {
			msg += " by " + st.SignalledBy
		}
		d.final(p, w, now, transition{attempt: 1, phase: plugin.PhaseSucceeded, at: at, reason: flytev1.ReasonSignaled, message: msg})
		return
	}
	if to := w.ConditionTimeout; to > 0 {
		deadline := w.TA.CreationTimestamp.Add(to)
		if !now.Before(deadline) {
			d.final(p, w, now, transition{attempt: 1, phase: plugin.PhasePermanentFailure, at: deadline, reason: flytev1.ReasonTimedOut,
				err: &plugin.ExecError{Code: CodeTimeout, Kind: flytev1.ErrorKindUser, Message: fmt.Sprintf("no signal within the condition's timeout of %v", to)}})
			return
		}
		p.wake(deadline.Sub(now))
	}
	t := transition{attempt: 1, phase: phasePaused, paused: true, at: now, message: "waiting for a signal"}
	if changed(&w.TA.Status, t) {
		d.report(p, w, now, t)
	}
	p.wake(d.Safety)
}
