package controller

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// launchFailure is the verdict on a failed create of the attempt's object
// (undecided when the launch did not fail):
//   - the name is still held by an object being deleted: wait, it goes away;
//   - a quota refusal: wait with backoff; no user attempt is consumed;
//   - any other refusal by admission (PodSecurity, webhooks, RBAC) is
//     deterministic: the task ends with the API server's words;
//   - an object the API server rejects (invalid, too large), or a name held
//     by an object that is not ours: the task ends;
//   - a retryable refusal of the attempt: a user failure (retried while
//     attempts remain);
//   - anything else (API errors) is a system failure.
func (d decider) launchFailure(w World, now time.Time, s attemptState, attempt uint32) verdict {
	if w.Launch == nil || w.Launch.Err == nil {
		return verdict{}
	}
	err := w.Launch.Err
	if errors.Is(err, plugin.ErrResourceTerminating) {
		return verdict{kind: verdictProgress, state: s, wake: d.Backoff, t: transition{attempt: attempt, phase: plugin.PhaseQueued, at: now,
			message: "waiting for an earlier pod of this name to be deleted"}}
	}
	var le *plugin.LaunchError
	if !errors.As(err, &le) {
		return verdict{kind: verdictSystemFailure, state: s,
			cause: &plugin.ExecError{Code: CodeSystemError, Kind: flytev1.ErrorKindSystem, Message: err.Error()}}
	}
	e := le.Err
	refused := func(code, msg string) verdict {
		return ends(transition{attempt: attempt, phase: plugin.PhasePermanentFailure, at: now,
			err: &plugin.ExecError{Code: code, Kind: flytev1.ErrorKindUser, Message: msg}})
	}
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
		return verdict{kind: verdictProgress, state: s, wake: wait, wakeOnly: true, quotaRefused: true,
			t: transition{attempt: attempt, phase: plugin.PhaseWaitingForResources, at: now, message: "waiting for resource quota: " + e.Message}}
	case e.Code == plugin.CodeForbidden:
		return refused(CodeLaunchRefused, fmt.Sprintf("the pod was refused at admission and would be again: %s", e.Message))
	case e.Code == plugin.CodeAlreadyExists:
		return refused(CodeForeignResource, e.Message+": the executor will not delete or adopt it; rename the TaskAction or remove that pod")
	case !le.Retryable:
		return ends(transition{attempt: attempt, phase: plugin.PhasePermanentFailure, at: now, err: &e})
	}
	return attemptFailed(w, transition{attempt: attempt, phase: plugin.PhaseRetryableFailure, at: now, err: &e, message: e.Message})
}

// backoffPending is the verdict while the attempt's next try waits out a
// backoff (a system failure's or a quota refusal's).
func backoffPending(s attemptState, now time.Time) verdict {
	if s.RetryAt != nil && now.Before(s.RetryAt.Time) {
		return verdict{kind: verdictWait, wake: s.RetryAt.Sub(now)}
	}
	return verdict{}
}

// inputsUnreadable is the verdict when the cache key needs the task's inputs
// and blob storage could not give them: nothing can be decided, so the try
// counts as a system failure and is tried again.
func inputsUnreadable(w World, s attemptState) verdict {
	if k := w.InputsKey; k != nil && k.StorageErr != nil {
		return verdict{kind: verdictSystemFailure, state: s, cause: &plugin.ExecError{Code: CodeStorageError, Kind: flytev1.ErrorKindSystem,
			Message: fmt.Sprintf("the cache key needs the task's inputs: %v", k.StorageErr)}}
	}
	return verdict{}
}
