package controller

import (
	"time"
)

// retry ends the attempt of t with a user failure that leaves attempts to go:
// the failed attempt is reported, and the next attempt starts afresh (its own
// system-failure count, its own state). Its pod is deleted once the failure is
// durable; its launch is the next reconcile's work.
func (d decider) retry(p *Plan, w World, now time.Time, t transition) {
	st := &p.Status
	d.report(p, w, now, t)
	if w.Pod.Holder == holderUs && !w.Pod.Deleting {
		p.Delete = append(p.Delete, objectRef{Name: w.Pod.Name, UID: w.Pod.UID})
	}
	st.Attempts = t.attempt + 1
	st.PluginPhaseVersion = 0
	st.SystemFailures = 0
	writeState(st, attemptState{Attempt: st.Attempts})
	p.Metrics.Retry = true
	p.wake(wakeSoon)
}
