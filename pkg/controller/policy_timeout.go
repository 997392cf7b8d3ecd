package controller

import (
	"fmt"
	"time"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// tryStart is when the current try's timeout starts counting: when its launch
// was first refused for quota (it waits meanwhile), else when its pod was
// created (zero: neither yet).
func tryStart(s attemptState, podCreated time.Time) time.Time {
	if s.WaitingSince != nil && (podCreated.IsZero() || s.WaitingSince.Time.Before(podCreated)) {
		return s.WaitingSince.Time
	}
	return podCreated
}

// applyTimeout judges the attempt's observation against its deadline (the
// task's timeout counted from tryStart). A pod that ended by the deadline is
// judged by how it ended, however late it is seen; one still going at the
// deadline times out. Otherwise the plan wakes at the deadline.
func (d decider) applyTimeout(p *Plan, w World, now time.Time, s attemptState, obs plugin.Observation) plugin.Observation {
	start := tryStart(s, w.Pod.Created)
	if w.Task == nil || w.Task.Timeout <= 0 || start.IsZero() {
		return obs
	}
	deadline := start.Add(w.Task.Timeout)
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
		Error:      timeoutError(max(p.Status.Attempts, 1), w.Task.Timeout),
	}
}

func timeoutError(attempt uint32, timeout time.Duration) *plugin.ExecError {
	return &plugin.ExecError{Code: CodeTimeout, Kind: flytev1.ErrorKindUser,
		Message: fmt.Sprintf("attempt %d exceeded its timeout of %v", attempt, timeout)}
}

// waitTimedOut ends an attempt whose launch has waited (quota refusals) past
// its timeout without a pod: a timeout like a pod's, retried while attempts
// remain. It returns false, and wakes at the deadline, while time is left.
func (d decider) waitTimedOut(p *Plan, w World, now time.Time, s attemptState) bool {
	if w.Task == nil || w.Task.Timeout <= 0 || s.WaitingSince == nil {
		return false
	}
	deadline := s.WaitingSince.Add(w.Task.Timeout)
	if now.Before(deadline) {
		p.wake(deadline.Sub(now))
		return false
	}
	attempt := max(p.Status.Attempts, 1)
	e := timeoutError(attempt, w.Task.Timeout)
	t := transition{attempt: attempt, phase: plugin.PhaseRetryableFailure, at: deadline, err: e,
		message: e.Message + " waiting for resource quota"}
	if attempt < maxAttempts(w.Task) {
		d.retry(p, w, now, t)
	} else {
		d.final(p, w, now, t)
	}
	return true
}
