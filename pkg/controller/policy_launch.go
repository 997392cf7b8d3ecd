package controller

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// launchFailed decides what a failed pod create means:
//   - the name is still held by a pod being deleted: wait, it goes away;
//   - a quota refusal: wait with backoff; no user attempt is consumed;
//   - any other refusal by admission (PodSecurity, webhooks, RBAC) is
//     deterministic: the task ends with the API server's words;
//   - a pod the API server rejects (invalid, too large), or a name held by a
//     pod that is not ours: the task ends;
//   - a retryable refusal of the attempt: a user failure (retried while
//     attempts remain);
//   - anything else (API errors) is a system failure.
func (d decider) launchFailed(p *Plan, w World, now time.Time, s attemptState, err error) {
	st := &p.Status
	attempt := max(st.Attempts, 1)
	if errors.Is(err, plugin.ErrResourceTerminating) {
		d.progress(p, w, now, s, transition{attempt: attempt, phase: plugin.PhaseQueued, at: now,
			message: "waiting for an earlier pod of this name to be deleted"})
		p.wake(d.Backoff)
		return
	}
	var le *plugin.LaunchError
	if !errors.As(err, &le) {
		d.systemFailure(p, w, now, s, &plugin.ExecError{Code: CodeSystemError, Kind: flytev1.ErrorKindSystem, Message: err.Error()})
		return
	}
	e := le.Err
	switch {
	case e.Code == plugin.CodeQuotaExceeded:
		s.QuotaWaits++
		if s.WaitingSince == nil {
			since := metav1.NewTime(now)
			s.WaitingSince = &since
		}
		wait := backoff(d.Backoff, s.QuotaWaits)
		at := metav1.NewTime(now.Add(wait))
		s.RetryAt = &at
		p.Metrics.QuotaRefusal = true
		d.progress(p, w, now, s, transition{attempt: attempt, phase: plugin.PhaseWaitingForResources, at: now,
			message: "waiting for resource quota: " + e.Message})
		p.WakeAfter = 0
		p.wake(wait)
	case e.Code == plugin.CodeForbidden:
		d.final(p, w, now, transition{attempt: attempt, phase: plugin.PhasePermanentFailure, at: now,
			err: &plugin.ExecError{Code: CodeLaunchRefused, Kind: flytev1.ErrorKindUser,
				Message: fmt.Sprintf("the pod was refused at admission and would be again: %s", e.Message)}})
	case e.Code == plugin.CodeAlreadyExists:
		d.final(p, w, now, transition{attempt: attempt, phase: plugin.PhasePermanentFailure, at: now,
			err: &plugin.ExecError{Code: CodeForeignResource, Kind: flytev1.ErrorKindUser, Message: e.Message +
				": the executor will not delete or adopt it; rename the TaskAction or remove that pod"}})
	case !le.Retryable:
		d.final(p, w, now, transition{attempt: attempt, phase: plugin.PhasePermanentFailure, at: now, err: &e})
	case attempt < maxAttempts(w.Task):
		d.retry(p, w, now, transition{attempt: attempt, phase: plugin.PhaseRetryableFailure, at: now, err: &e, message: e.Message})
	default:
		d.final(p, w, now, transition{attempt: attempt, phase: plugin.PhaseRetryableFailure, at: now, err: &e})
	}
}
