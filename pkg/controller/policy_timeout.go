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

// attemptTimeout judges the attempt's observation against its deadline (the
// task's timeout counted from tryStart). An object that ended by the deadline
// is judged by how it ended, however late it is seen; one still going at the
// deadline times out. Otherwise it asks to wake at the deadline.
func attemptTimeout(w World, now time.Time, s attemptState, obs plugin.Observation, attempt uint32) (plugin.Observation, time.Duration) {
	start := tryStart(s, w.Pod.Created)
	if w.Task == nil || w.Task.Timeout <= 0 || start.IsZero() {
		return obs, 0
	}
	deadline := start.Add(w.Task.Timeout)
	if obs.Phase.IsTerminal() {
		if ended := obs.OccurredAt; ended.IsZero() || !ended.After(deadline) {
			return obs, 0
		}
	} else if now.Before(deadline) {
		return obs, deadline.Sub(now)
	}
	return plugin.Observation{
		Phase:      plugin.PhaseRetryableFailure,
		OccurredAt: deadline,
		Error:      timeoutError(attempt, w.Task.Timeout),
	}, 0
}

func timeoutError(attempt uint32, timeout time.Duration) *plugin.ExecError {
	return &plugin.ExecError{Code: CodeTimeout, Kind: flytev1.ErrorKindUser,
		Message: fmt.Sprintf("attempt %d exceeded its timeout of %v", attempt, timeout)}
}

// quotaWaitTimeout is the verdict on an attempt whose launch has waited
// (quota refusals) past its timeout without an object: a timeout like a
// pod's, retried while attempts remain. While time is left it does not
// decide, and asks to wake at the deadline.
func quotaWaitTimeout(w World, now time.Time, s attemptState, attempt uint32) verdict {
	if w.Task == nil || w.Task.Timeout <= 0 || s.WaitingSince == nil {
		return verdict{}
	}
	deadline := s.WaitingSince.Add(w.Task.Timeout)
	if now.Before(deadline) {
		return verdict{wake: deadline.Sub(now)}
	}
	e := timeoutError(attempt, w.Task.Timeout)
	return attemptFailed(w, transition{attempt: attempt, phase: plugin.PhaseRetryableFailure, at: deadline, err: e,
		message: e.Message + " waiting for resource quota"})
}
