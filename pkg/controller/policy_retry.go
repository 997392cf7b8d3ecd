package controller

import (
	"fmt"

	"github.com/taskaction/executor/pkg/plugin"
)

// retriedAs is the transition that reports the failure of t's attempt: the
// next attempt queued, with the failure's error.
//
// The failure is reported as the next attempt's first QUEUED event, which
// carries the error and says which attempt failed: Flyte's runs service takes
// a FAILED event as the end of its attempt, and its watch of the action ends
// when the latest attempt has ended, so a FAILED event for an attempt that is
// retried would show the action as over (Flyte's own executor sends none).
func retriedAs(t transition, next uint32) transition {
	msg := t.message
	if msg == "" && t.err != nil {
		msg = t.err.Message
	}
	return transition{attempt: next, phase: plugin.PhaseQueued, at: t.at, err: t.err,
		message: fmt.Sprintf("attempt %d failed and is retried as attempt %d: %s", t.attempt, next, msg)}
}

// attemptFailed is the verdict on a failure of the task's own: retried while
// attempts remain, else the end.
func attemptFailed(w World, t transition) verdict {
	if t.attempt < maxAttempts(w.Task) {
		return verdict{kind: verdictRetry, t: t}
	}
	return verdict{kind: verdictEnd, t: t}
}
