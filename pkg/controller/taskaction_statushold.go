package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/taskaction/executor/pkg/plugin"
)

// deferQueued holds back the Queued status of a new pod for QueuedDelay after
// its creation: a pod that starts within it costs no status write for Queued.
// The QUEUED event is reported at once, and again on each reconcile until a
// status is written: the same identity and content each time (the events
// service stores it once), since nothing else is reported meanwhile. Only
// when the plan would write nothing else.
func (d decider) deferQueued(p *Plan, w World, now time.Time, attempt uint32) bool {
	hold := d.statusHold(w)
	until := w.Pod.Created.Add(hold)
	if hold <= 0 || !now.Before(until) || !equality.Semantic.DeepEqual(p.Status, w.TA.Status) {
		return false
	}
	t := podCreated(w)
	p.Events = append(p.Events, d.event(w, &p.Status, t, eventVersion(&p.Status, identityEpoch(w.TA), attempt, eventPhase(t))))
	d.wakeHeld(p, w, now, until)
	return true
}

// holdRunning: while the executor or the API server is short of capacity
// (World.Saturated), the status that records a pod's start, when nothing of
// the pod is recorded yet, is held back up to ExecutingDelay after the start
// (its QUEUED and RUNNING are reported at once), so that a task that ends
// within it costs one status write, at its end. Otherwise Executing is
// written at once: Flyte's control plane shows an action as running only once
// the TaskAction's conditions say Executing. Holding back keeps the events
// and drops the status (and the transition metrics, counted when written).
func (d decider) holdRunning(p *Plan, w World, now time.Time, t transition) {
	hold := time.Duration(0)
	if w.Saturated && d.QueuedDelay > 0 {
		hold = d.ExecutingDelay
	}
	until := t.at.Add(hold)
	if hold <= 0 || t.phase != plugin.PhaseRunning || !now.Before(until) {
		return
	}
	p.Status, p.Recorded = *w.TA.Status.DeepCopy(), nil
	d.wakeHeld(p, w, now, until)
}

// statusHold is how long a new pod's Queued and Running statuses are held
// back (0: not at all): QueuedDelay, and at least SaturatedDelay while the
// executor or the API server is short of capacity (World.Saturated): then
// every write delays a launch or a completion, and the status of a pod that
// ends within the hold is written once. The events that report the same
// phases are sent at once meanwhile.
func (d decider) statusHold(w World) time.Duration {
	switch {
	case d.QueuedDelay <= 0:
		return 0
	case w.Saturated:
		return max(d.QueuedDelay, d.SaturatedDelay)
	}
	return d.QueuedDelay
}

// saturatedRecheck is how often, at least, a hold extended by saturation is
// looked at again, so that it ends soon after the saturation; saturation is
// remembered for as long (pressureMemory), so looking sooner finds it still
// there. Not every QueuedDelay: while the executor is short of CPU each of
// those reconciles costs some (measured at QPS 1000: 11 reconciles per
// TaskAction rechecking every 5s, 6 without rechecks).
const saturatedRecheck = pressureMemory

// wakeHeld wakes a held-back status when its hold ends, and before that every
// QueuedDelay; while saturated, after as long as the status has been held
// (at least saturatedRecheck): a long overload costs each held TaskAction a
// number of rechecks logarithmic in its length rather than linear (at
// N=10,000 and QPS 1000 the 30 s rechecks were 3.6 of 7.6 reconciles per
// TaskAction), and the statuses held longest are released last when it ends.
func (d decider) wakeHeld(p *Plan, w World, now, until time.Time) {
	recheck := d.QueuedDelay
	if w.Saturated {
		recheck = max(recheck, saturatedRecheck, now.Sub(w.Pod.Created))
	}
	p.wake(min(until.Sub(now), recheck))
}
