package controller

import (
	"fmt"
	"time"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// applyTimeout judges the attempt's observation against its deadline (the
// task's timeout counted from the creation of the try's pod). A pod that
// ended by the deadline is judged by how it ended, however late it is seen;
// one still going at the deadline times out. Otherwise the plan wakes at the
// deadline.
func (d decider) applyTimeout(p *Plan, w World, now time.Time, obs plugin.Observation) plugin.Observation {
	if w.Task == nil || w.Task.Timeout <= 0 || w.Pod.Created.IsZero() {
		return obs
	}
	deadline := w.Pod.Created.Add(w.Task.Timeout)
	if obs.Phase.IsTerminal() {
		if ended := obs.OccurredAt; ended.IsZero() || !ended.After(deadline) {
			return obs
		}
	} else if now.Before(deadline) {
		p.wake(deadline.Sub(now))
		return obs
	}
	return plugin.Observation{
		Phase:      plugin.PhaseRetryableFailure,
		OccurredAt: deadline,
		Error: &plugin.ExecError{Code: CodeTimeout, Kind: flytev1.ErrorKindUser,
			Message: fmt.Sprintf("attempt %d exceeded its timeout of %v", max(p.Status.Attempts, 1), w.Task.Timeout)},
	}
}
