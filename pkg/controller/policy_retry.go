package controller

import (
	"fmt"
	"time"

	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
)

// retry ends the attempt of t with a user failure that leaves attempts to go:
// the failed attempt is recorded, and the next attempt starts afresh (its own
// system-failure count, its own state). Its pod is deleted once the failure is
// durable; its launch is the next reconcile's work.
//
// The failure is reported as the next attempt's first QUEUED event, which
// carries the error and says which attempt failed: Flyte's runs service takes
// a FAILED event as the end of its attempt, and its watch of the action ends
// when the latest attempt has ended, so a FAILED event for an attempt that is
// retried would show the action as over (Flyte's own executor sends none).
func (d decider) retry(p *Plan, w World, now time.Time, t transition) {
	st := &p.Status
	next := t.attempt + 1
	ver := eventVersion(st, identityEpoch(w.TA), next, events.PhaseQueued)
	p.Events = append(p.Events, d.event(w, st, retriedAs(t, next), ver))
	st.Attempts = t.attempt
	record(st, t, ver, now)
	p.Recorded = append(p.Recorded, historyName(t))
	if w.Pod.Holder == holderUs && !w.Pod.Deleting {
		p.Delete = append(p.Delete, objectRef{Name: w.Pod.Name, UID: w.Pod.UID})
	}
	st.Attempts = next
	st.PluginPhaseVersion = 0
	st.SystemFailures = 0
	writeState(st, attemptState{Attempt: st.Attempts})
	p.Metrics.Retry = true
	p.wake(wakeNow)
}

// retriedAs is the transition that reports the failure of t's attempt: the
// next attempt queued, with the failure's error.
func retriedAs(t transition, next uint32) transition {
	msg := t.message
	if msg == "" && t.err != nil {
		msg = t.err.Message
	}
	return transition{attempt: next, phase: plugin.PhaseQueued, at: t.at, err: t.err,
		message: fmt.Sprintf("attempt %d failed and is retried as attempt %d: %s", t.attempt, next, msg)}
}
