package controller

import (
	"fmt"
	"time"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The plan's writers carry a settled verdict (or an end that needs no policy:
// an invalid spec, a duplicate) into the plan: the status, the events, the
// deletions, the cache's reservation, the wake-up. They decide nothing: a
// writer may use another (an end reports its transition and stops what is
// left), and settle (verdict.go) is how the decider calls them.

// stopLeftovers stops the pods a TaskAction that ended (or is being deleted)
// still has: the current attempt's pod unless it finished by itself (kept for
// its logs until the TaskAction goes, then removed by Kubernetes' garbage
// collector through its owner reference: no request of ours) and none of its
// sidecars runs on (Obs.Lingering), and the pods of earlier attempts.
func (d decider) stopLeftovers(p *Plan, w World) {
	if w.Pod.Holder == holderUs && !w.Pod.Deleting && (!w.Pod.Obs.Finished || w.Pod.Obs.Lingering) {
		p.Delete = append(p.Delete, objectRef{Name: w.Pod.Name, UID: w.Pod.UID})
	}
	for _, o := range w.Others {
		if !o.Deleting {
			p.Delete = append(p.Delete, objectRef{Name: o.Name, UID: o.UID})
		}
	}
}

// keepReservation extends the cache reservation this TaskAction holds while
// its attempt runs, on every path (a status held back included): it lapses a
// heartbeat's length after its last renewal, and another TaskAction would
// then run the same work.
func (d decider) keepReservation(p *Plan, w World) {
	if holdsReservation(w) && p.Status.CacheStatus == flytev1.CacheMiss {
		p.ExtendReservation = true
		p.wake(heartbeat(d.Backoff))
	}
}

// progress records a non-terminal transition when it says something new.
func (d decider) progress(p *Plan, w World, now time.Time, s attemptState, t transition) {
	st := &p.Status
	old := readState(&w.TA.Status, t.attempt)
	if changed(&w.TA.Status, t) || old.Pod != s.Pod {
		d.report(p, w, now, t)
	}
	writeState(st, s)
	p.wake(d.Safety)
}

// changed says whether t is worth reporting: a new attempt or phase, or new
// details of the same phase.
func changed(old *flytev1.TaskActionStatus, t transition) bool {
	if old.Attempts != t.attempt || old.PluginPhase != string(t.phase) {
		return true
	}
	if versionSeq(old.PluginPhaseVersion) == versionSeqMax {
		// Details of the same phase no longer get a version of their own.
		return false
	}
	c := progressing(old)
	return c == nil || (t.message != "" && c.Message != truncate(t.message, maxConditionMessage))
}

// succeed ends the TaskAction successfully, storing the outputs in the cache first.
func (d decider) succeed(p *Plan, w World, now time.Time, t transition) {
	st := &p.Status
	if key, ok := cacheKey(w); ok && st.CacheStatus == flytev1.CacheMiss {
		if w.Put == nil {
			e := cacheEntryOf(w, key, t.attempt).Entry
			p.Populate = &e
			return
		}
		if w.Put.Err != nil {
			st.CacheStatus = flytev1.CachePutFailure
			t.message = fmt.Sprintf("the outputs could not be stored in the cache: %v", w.Put.Err)
			p.Warnings = append(p.Warnings, warning{EventCachePutFailed, "PopulatingCache", t.message})
		} else {
			st.CacheStatus = flytev1.CachePopulated
		}
	}
	t.final, t.reason = true, flytev1.ReasonCompleted
	d.final(p, w, now, t)
}

// final records the TaskAction's last transition and cleans up after it.
func (d decider) final(p *Plan, w World, now time.Time, t transition) {
	t.final = true
	if t.reason == "" {
		t.reason = flytev1.ReasonPermanentFailure
		if t.err != nil && t.err.Code == CodeTimeout {
			t.reason = flytev1.ReasonTimedOut
		}
	}
	if t.message == "" && t.err != nil {
		t.message = t.err.Message
	}
	d.report(p, w, now, t)
	writeState(&p.Status, attemptState{Attempt: t.attempt})
	if w.Pod.Obs.Finished && !w.Pod.Obs.OccurredAt.IsZero() {
		p.Metrics.TerminalLatency = now.Sub(w.Pod.Obs.OccurredAt)
	}
	d.stopLeftovers(p, w)
	// Released once, after the end is durable; a crash before that leaves it
	// to expire (a heartbeat's length).
	p.ReleaseReservation = holdsReservation(w)
	setReservation(&p.Status, nil)
	p.WakeAfter = 0
}

// fail ends a TaskAction that cannot run (invalid spec, no plugin).
func (d decider) fail(p *Plan, w World, now time.Time, attempt uint32, reason, code, kubeReason, msg string) {
	p.Warnings = append(p.Warnings, warning{kubeReason, "ValidatingTaskAction", msg})
	t := transition{attempt: attempt, phase: plugin.PhasePermanentFailure, message: msg, at: now, reason: reason,
		err: &plugin.ExecError{Code: code, Kind: flytev1.ErrorKindUser, Message: msg}}
	d.final(p, w, now, t)
	if !identified(w.TA) {
		p.Events = nil // without its identity the events service could not store it
	}
}

// refuseDuplicate ends a TaskAction whose events could not be told apart
// from another's. Nothing is reported: under the shared identity, its FAILED
// would be taken for the other's.
func (d decider) refuseDuplicate(p *Plan, w World, now time.Time, attempt uint32) {
	s := w.TA.Spec
	msg := fmt.Sprintf("TaskAction %s already runs action %s of run %s in project %s, domain %s: events of the two could not be told apart",
		w.Duplicate.Name, s.ActionName, s.RunName, s.Project, s.Domain)
	if w.Duplicate.SameSecond {
		msg = fmt.Sprintf("TaskAction %s of the same action %s of run %s in project %s, domain %s was created in the same second: events of the two could not be told apart; create this one again",
			w.Duplicate.Name, s.ActionName, s.RunName, s.Project, s.Domain)
	}
	d.fail(p, w, now, attempt, flytev1.ReasonInvalidSpec, CodeDuplicateAction, EventFailedValidation, msg)
	p.Events = nil
}

// noteCacheAnswer records what the cache said in the status (MISS, or why
// the task runs without the cache), with its warning. It applies both to the
// decision before a launch and to the one taken again after it.
func (d decider) noteCacheAnswer(p *Plan, w World) {
	st := &p.Status
	a := w.Cache
	if _, ok := cacheKey(w); !ok || !a.Asked || a.Hit != nil {
		return
	}
	switch {
	case a.KeyErr != nil:
		st.CacheStatus = flytev1.CacheSkipped
		p.Metrics.CacheLookup = st.CacheStatus.String()
		p.Warnings = append(p.Warnings, warning{EventCacheSkipped, "ConsultingCache",
			fmt.Sprintf("not using the cache: %v", a.KeyErr)})
	case a.LookupErr != nil:
		st.CacheStatus = flytev1.CacheLookupFailure
		p.Metrics.CacheLookup = st.CacheStatus.String()
		p.Warnings = append(p.Warnings, warning{EventCacheLookupFailed, "ConsultingCache",
			fmt.Sprintf("cache lookup of %s failed, running the task: %v", a.Key, a.LookupErr)})
	default:
		if st.CacheStatus != flytev1.CacheMiss {
			st.CacheStatus = flytev1.CacheMiss
			p.Metrics.CacheLookup = st.CacheStatus.String()
		}
		if serializable(w) && a.HeldBy == "" {
			// Taken by gather's ask (or to be taken again by the heartbeat).
			key := a.Key
			setReservation(st, &key)
		}
	}
}

// retry ends the attempt of t with a user failure that leaves attempts to go:
// the failed attempt is recorded, and the next attempt starts afresh (its own
// system-failure count, its own state), its failure reported as the next
// attempt's QUEUED (retriedAs). Its pod is deleted once the failure is
// durable; its launch is the next reconcile's work.
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

// systemFailure counts a failure of the current try that is not the task's
// own (object deleted or evicted, node lost, API error), as afterSystemFailure
// rules: the end past the ceiling, else the same attempt again after a
// backoff. The failed try's object is marked discarded in the status before
// it is deleted, so that a crash in between neither counts it twice nor
// adopts it again.
func (d decider) systemFailure(p *Plan, w World, now time.Time, s attemptState, cause *plugin.ExecError) {
	st := &p.Status
	st.SystemFailures++
	p.Metrics.SystemFailure = cause.Code
	p.Warnings = append(p.Warnings, warning{EventFailedPluginHandle, "HandlingPlugin",
		fmt.Sprintf("system failure %d of at most %d: [%s] %s", st.SystemFailures, d.MaxSystemFailures, cause.Code, cause.Message)})
	end, wait := d.afterSystemFailure(st.SystemFailures, cause)
	if end != nil {
		d.final(p, w, now, transition{attempt: max(st.Attempts, 1), phase: plugin.PhasePermanentFailure, at: now, err: end})
		return
	}
	if w.Pod.Holder == holderUs {
		s.Discarded = w.Pod.UID
		if !w.Pod.Deleting {
			p.Delete = append(p.Delete, objectRef{Name: w.Pod.Name, UID: w.Pod.UID})
		}
	}
	s.Pod, s.WaitingSince = "", nil
	retryAt := metav1.NewTime(now.Add(wait))
	s.RetryAt = &retryAt
	writeState(st, s)
	st.ErrorState = &flytev1.ErrorState{Code: cause.Code, Kind: flytev1.ErrorKindSystem, Message: truncate(cause.Message, maxErrorMessage)}
	p.wake(wait)
}
