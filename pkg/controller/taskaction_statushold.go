package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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

// wakeHeld wakes a held-back status when its hold ends. One held longer
// because the executor is saturated is also woken when the saturation ends
// (liftHeldStatuses), rather than rechecked on a timer: each recheck is a
// reconcile while the executor is short of CPU (at N=10,000 rechecks were
// 1.4–2.6 of 4.4–5.6 reconciles per TaskAction).
func (d decider) wakeHeld(p *Plan, w World, now, until time.Time) {
	p.HeldWhileSaturated = p.HeldWhileSaturated || w.Saturated
	p.wake(until.Sub(now))
}

// liftInterval is how often the reconciler looks whether the saturation that
// holds statuses back has ended: a look in memory, no request.
const liftInterval = time.Second

// liftPriority is the queue priority of a TaskAction woken to write its
// held-back status: after anything else that waits.
const liftPriority = -1

// liftHeldStatuses wakes the TaskActions whose statuses saturation holds back
// once the executor is no longer saturated, each once; their reconciles
// write them even if the flood of writes brings the saturation back (gather:
// a lifted hold no longer counts it). It returns how many it woke.
func (r *Reconciler) liftHeldStatuses() int {
	q := r.queue.Load()
	if q == nil || !r.memory.heldStatuses.waiting() || r.saturated() {
		return 0
	}
	keys := r.memory.heldStatuses.lift()
	reqs := make([]reconcile.Request, len(keys))
	for i, k := range keys {
		reqs[i] = reconcile.Request{NamespacedName: k}
	}
	(*q).AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(liftPriority)}, reqs...)
	return len(reqs)
}

// liftHeldStatusesLoop runs liftHeldStatuses every liftInterval until ctx ends
// (a manager runnable: only the leader reconciles, so only it holds any).
func (r *Reconciler) liftHeldStatusesLoop(ctx context.Context) error {
	t := time.NewTicker(liftInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			r.liftHeldStatuses()
		}
	}
}
