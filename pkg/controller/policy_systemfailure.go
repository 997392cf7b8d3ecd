package controller

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// maxBackoff caps every backoff.
const maxBackoff = 5 * time.Minute

// backoff is the wait after the n-th consecutive refusal or failure: base,
// doubling, at most maxBackoff.
func backoff(base time.Duration, n uint32) time.Duration {
	d := base
	for i := uint32(1); i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// systemFailure counts a failure of the current try that is not the task's
// own (pod deleted or evicted, node lost, API error). Below the ceiling the
// same attempt runs again after a backoff; the failed try's pod is marked
// discarded in the status before it is deleted, so that a crash in between
// neither counts it twice nor adopts it again.
func (d decider) systemFailure(p *Plan, w World, now time.Time, s attemptState, cause *plugin.ExecError) {
	st := &p.Status
	st.SystemFailures++
	p.Metrics.SystemFailure = cause.Code
	p.Warnings = append(p.Warnings, warning{EventFailedPluginHandle, "HandlingPlugin",
		fmt.Sprintf("system failure %d of at most %d: [%s] %s", st.SystemFailures, d.MaxSystemFailures, cause.Code, cause.Message)})
	attempt := max(st.Attempts, 1)
	if st.SystemFailures > d.MaxSystemFailures {
		d.final(p, w, now, transition{attempt: attempt, phase: plugin.PhasePermanentFailure, at: now,
			err: &plugin.ExecError{Code: CodeMaxSystemFailuresExceeded, Kind: flytev1.ErrorKindSystem,
				Message: fmt.Sprintf("failed with a system error %d times in a row; last: [%s] %s", st.SystemFailures, cause.Code, cause.Message)}})
		return
	}
	if w.Pod.Holder == holderUs {
		s.Discarded = w.Pod.UID
		if !w.Pod.Deleting {
			p.Delete = append(p.Delete, objectRef{Name: w.Pod.Name, UID: w.Pod.UID})
		}
	}
	s.Pod, s.WaitingSince = "", nil
	wait := backoff(d.Backoff, st.SystemFailures)
	retryAt := metav1.NewTime(now.Add(wait))
	s.RetryAt = &retryAt
	writeState(st, s)
	st.ErrorState = &flytev1.ErrorState{Code: cause.Code, Kind: flytev1.ErrorKindSystem, Message: truncate(cause.Message, maxErrorMessage)}
	p.wake(wait)
}
