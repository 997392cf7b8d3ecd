package controller

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
) // decider holds the settings decisions depend on. decide is a pure function
// of what was gathered and the time: no I/O, no clock of its own.
type decider struct {
	Cluster           string
	MaxSystemFailures uint32
	// Backoff is the base of every backoff and the reservation heartbeat.
	Backoff time.Duration
	// Safety is the wake-up of a state that waits for a watch event: were the
	// event lost, the TaskAction is looked at again after this long.
	Safety time.Duration
	// QueuedDelay holds back the Queued status of a new pod (deferQueued).
	QueuedDelay time.Duration
	// SaturatedDelay extends QueuedDelay while World.Saturated (statusHold).
	SaturatedDelay time.Duration
	// ExecutingDelay bounds how long a running pod's Executing status is held
	// back while World.Saturated (holdRunning); otherwise it is written at once.
	ExecutingDelay time.Duration
}

// Wake-ups for waits that the next watch event normally ends early.
const (
	wakeNow      = time.Millisecond // the next step is ready (next attempt's launch)
	wakeCacheLag = time.Second      // the watch event of the awaited write ends it
)

// decide computes the plan for the TaskAction of w at now.
func (d decider) decide(w World, now time.Time) Plan {
	p := Plan{Status: *w.TA.Status.DeepCopy()}
	switch {
	case !w.TA.DeletionTimestamp.IsZero():
		d.deleted(&p, w, now)
	case w.TA.Status.IsTerminal():
		d.terminal(&p, w)
	case w.TA.Spec.ActionType == flytev1.ActionTypeCondition:
		d.condition(&p, w, now)
	default:
		d.task(&p, w, now)
	}
	if w.TA.Spec.ActionType == flytev1.ActionTypeCondition {
		// Flyte's executor reports nothing for a condition (its runs service
		// lists no attempt for one): its phase is read from the conditions.
		p.Events = nil
	}
	if !equality.Semantic.DeepEqual(p.Status, w.TA.Status) {
		sealRecord(&p.Status)
	}
	return p
}

// deleted: a TaskAction being deleted is aborted (unless it had ended),
// then let go.
func (d decider) deleted(p *Plan, w World, now time.Time) {
	if !controllerutil.ContainsFinalizer(w.TA, flytev1.Finalizer) {
		return
	}
	if hold := releaseHold(w.TA, now); hold > 0 {
		// Nothing until then: the abort is reported once, when it is let go.
		p.wake(hold)
		return
	}
	if !w.TA.Status.IsTerminal() {
		attempt := max(w.TA.Status.Attempts, 1)
		d.recordLaunch(p, w, now, attempt)
		// The deletion's own time: a re-sent ABORTED says the same.
		t := transition{attempt: attempt, phase: plugin.PhasePermanentFailure, final: true, reason: flytev1.ReasonAborted,
			message: "the TaskAction was deleted", at: w.TA.DeletionTimestamp.Time}
		// Reported, not persisted: the object is going away.
		p.Events = append(p.Events, d.event(w, &p.Status, t, eventVersion(&p.Status, identityEpoch(w.TA), attempt, eventPhase(t))))
		p.Recorded = append(p.Recorded, flytev1.ReasonAborted)
		p.ReleaseReservation = holdsReservation(w)
	}
	d.stopLeftovers(p, w)
	p.RemoveFinalizer = true
}

// recordLaunch records the launch of attempt's pod when the status does not
// yet (its Queued was held back), so that the attempt is counted in the
// status Flyte's control plane reads before the TaskAction goes. Its QUEUED
// event goes again with it (the same identity: the events service keeps one).
func (d decider) recordLaunch(p *Plan, w World, now time.Time, attempt uint32) {
	if readState(&w.TA.Status, attempt).Pod != "" || (w.TA.Status.Attempts == attempt && w.TA.Status.PluginPhase != "") {
		return
	}
	var created time.Time
	switch {
	case w.Pod.Holder == holderUs:
		created = w.Pod.Created
	case w.LaunchInFlight != nil:
		created = w.LaunchInFlight.Created
	default:
		return
	}
	d.report(p, w, now, launchedQueued(attempt, w.Pod.Name, created))
}

// terminal: level-triggered cleanup of a TaskAction that has ended. Its
// finalizer stays until it is deleted, so that an ended TaskAction costs no
// metadata write and its deletion (by the garbage collector) costs two
// requests: the DELETE and the release.
func (d decider) terminal(p *Plan, w World) {
	if controllerutil.ContainsFinalizer(w.TA, flytev1.Finalizer) {
		d.stopLeftovers(p, w)
	}
}

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

// task advances a task action by one step.
func (d decider) task(p *Plan, w World, now time.Time) {
	st := &p.Status
	attempt := max(st.Attempts, 1)
	switch {
	case w.SpecErr != nil:
		d.fail(p, w, now, attempt, flytev1.ReasonInvalidSpec, CodeInvalidSpec, EventFailedValidation, w.SpecErr.Error())
		return
	case w.PluginErr != nil:
		d.fail(p, w, now, attempt, flytev1.ReasonPluginNotFound, CodePluginNotFound, EventFailedPluginResolve, w.PluginErr.Error())
		return
	case w.Duplicate != nil:
		d.refuseDuplicate(p, w, now, attempt)
		return
	}
	if !controllerutil.ContainsFinalizer(w.TA, flytev1.Finalizer) {
		p.AddFinalizer = true
	}
	if w.PodCacheBehind {
		p.wake(wakeCacheLag)
		return
	}
	for _, o := range w.Others {
		// Pods of earlier attempts: their end is durable, so they go (level-triggered).
		if !o.Deleting {
			p.Delete = append(p.Delete, objectRef{Name: o.Name, UID: o.UID})
		}
	}
	s := readState(st, attempt)
	pod := w.Pod
	if u := w.LaunchInFlight; u != nil && s.Pod == "" && pod.Holder == holderNone {
		// Launched with its Queued held back, and gone: recorded now as it
		// would have been then, so that its deletion by someone else is
		// counted like any other. Its QUEUED goes with it: the same event as
		// at the launch (skipped if that one was acknowledged), so that no
		// history entry is without its event.
		d.report(p, w, now, launchedQueued(attempt, w.Pod.Name, u.Created))
		s.Pod = u.Pod
	}
	switch {
	case pod.Holder == holderForeign:
		d.final(p, w, now, transition{attempt: attempt, phase: plugin.PhasePermanentFailure, at: now,
			err: &plugin.ExecError{Code: CodeForeignResource, Kind: flytev1.ErrorKindUser, Message: fmt.Sprintf(
				"pod %s/%s exists and is not controlled by this TaskAction: the executor will not delete or adopt it; rename the TaskAction or remove that pod",
				w.TA.Namespace, pod.Name)}})
	case pod.Holder == holderPreviousTaskAction:
		// A pod of an earlier TaskAction of the same name: the garbage collector removes it.
		d.progress(p, w, now, s, transition{attempt: attempt, phase: plugin.PhaseQueued, at: now,
			message: fmt.Sprintf("waiting for pod %s of an earlier TaskAction of the same name to be deleted", pod.Name)})
		p.wake(d.Backoff)
	case pod.Holder == holderUs && pod.UID == s.Discarded:
		// The failed try whose system failure is counted: delete it, then relaunch.
		if !pod.Deleting {
			p.Delete = append(p.Delete, objectRef{Name: pod.Name, UID: pod.UID})
		}
		p.wake(d.Backoff)
	case pod.Holder == holderUs:
		if w.Launch != nil {
			d.noteCacheAnswer(p, w) // the answer that let this launch happen
		}
		d.observe(p, w, now, s)
	case s.Pod != "":
		d.systemFailure(p, w, now, s, &plugin.ExecError{Code: CodeResourceDeletedExternally, Kind: flytev1.ErrorKindSystem,
			Message: fmt.Sprintf("pod %s/%s was deleted by someone other than the executor", w.TA.Namespace, pod.Name)})
	default:
		d.beforeLaunch(p, w, now, s)
	}
}

// beforeLaunch: the attempt's try has no pod yet. Wait out a backoff, consult
// the cache, or launch.
func (d decider) beforeLaunch(p *Plan, w World, now time.Time, s attemptState) {
	if d.waitTimedOut(p, w, now, s) {
		return
	}
	if s.RetryAt != nil && now.Before(s.RetryAt.Time) {
		p.wake(s.RetryAt.Sub(now))
		return
	}
	if w.Launch != nil && w.Launch.Err != nil {
		d.launchFailed(p, w, now, s, w.Launch.Err)
		return
	}
	if k := w.InputsKey; k != nil && k.StorageErr != nil {
		// The cache key needs the inputs: without them nothing is decided.
		d.systemFailure(p, w, now, s, &plugin.ExecError{Code: CodeStorageError, Kind: flytev1.ErrorKindSystem,
			Message: fmt.Sprintf("the cache key needs the task's inputs: %v", k.StorageErr)})
		return
	}
	if d.consultCache(p, w, now, s) {
		return
	}
	p.Launch = true
}

// observe follows the attempt's pod.
func (d decider) observe(p *Plan, w World, now time.Time, s attemptState) {
	st := &p.Status
	attempt := max(st.Attempts, 1)
	obs := w.Pod.Obs
	created := false // this observation records the pod's creation
	// Nothing of this pod is recorded yet, and nothing else is to be written:
	// its first states may be held back (holdRunning).
	mayHoldBack := s.Pod != w.Pod.UID && equality.Semantic.DeepEqual(p.Status, w.TA.Status)
	if s.Pod != w.Pod.UID {
		// Launched in this reconcile, or launched before a crash (or within
		// the Queued delay) and not recorded: ours.
		s.Pod, s.RetryAt, s.QuotaWaits = w.Pod.UID, nil, 0
		if w.Launch != nil {
			p.Metrics.Attempt = true
			if len(st.PhaseHistory) == 0 {
				p.Metrics.LaunchLatency = now.Sub(w.TA.CreationTimestamp.Time)
			}
		}
		if notStarted(obs.Phase) {
			if d.deferQueued(p, w, now, attempt) {
				d.keepReservation(p, w)
				return
			}
			created, obs.Phase = true, plugin.PhaseQueued
		} else {
			// Its Queued comes first, the same transition as if it had been
			// recorded at the launch (and the same event, if it was reported).
			d.progress(p, w, now, s, podCreated(w))
		}
	}
	if e := w.RuntimeError; obs.Finished && e != nil && e.StorageErr != nil {
		// Whether the runtime reported an error cannot be known: try again.
		d.systemFailure(p, w, now, s, &plugin.ExecError{Code: CodeStorageError, Kind: flytev1.ErrorKindSystem,
			Message: fmt.Sprintf("the attempt's error.pb could not be read: %v", e.StorageErr)})
		return
	}
	obs = withRuntimeError(obs, w.RuntimeError)
	obs = d.applyTimeout(p, w, now, s, obs)
	if obs.Phase.IsTerminal() && obs.Phase != plugin.PhaseSucceeded && obs.Error == nil {
		// A failure nothing explains is not the task's fault.
		obs.Error = &plugin.ExecError{Code: plugin.CodeUnknownError, Kind: flytev1.ErrorKindSystem, Message: obs.Message}
	}
	// A pod that says nothing of when its phase began began with the pod: the
	// same time however often (and however late) the transition is reported.
	t := transition{attempt: attempt, phase: obs.Phase, message: obs.Message, err: obs.Error, at: occurred(obs, w.Pod.Created, now)}
	if created && t.phase == plugin.PhaseQueued && t.err == nil {
		t = podCreated(w)
	}
	switch {
	case obs.Phase == plugin.PhaseRetryableFailure && obs.Error.Kind == flytev1.ErrorKindSystem:
		d.systemFailure(p, w, now, s, obs.Error)
	case obs.Phase == plugin.PhaseRetryableFailure && attempt < maxAttempts(w.Task):
		d.retry(p, w, now, t)
	case obs.Phase == plugin.PhaseSucceeded:
		d.succeed(p, w, now, t)
	case obs.Phase.IsTerminal():
		d.final(p, w, now, t)
	default:
		d.progress(p, w, now, s, t)
		p.wake(obs.RecheckAfter)
		d.keepReservation(p, w)
		if mayHoldBack {
			d.holdRunning(p, w, now, t)
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

// notStarted: the pod exists and has not started running.
func notStarted(ph plugin.Phase) bool {
	return ph == plugin.PhaseQueued || ph == plugin.PhaseInitializing || ph == plugin.PhaseWaitingForResources || ph == plugin.PhaseNotStarted
}

// podCreated is the Queued transition of an attempt's new object (a pod, an
// engine's job): the same, whenever it is computed, so a re-sent event is the
// same event.
func podCreated(w World) transition {
	return launchedQueued(max(w.TA.Status.Attempts, 1), w.Pod.Name, w.Pod.Created)
}

// launchedQueued is the Queued transition of attempt's object name, created
// at created.
func launchedQueued(attempt uint32, name string, created time.Time) transition {
	return transition{attempt: attempt, phase: plugin.PhaseQueued, message: name + " created", at: created, podCreated: true}
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

// maxAttempts is retries+1.
func maxAttempts(t *task.Task) uint32 { return uint32(t.MaxAttempts()) }

// releaseHold is how long a deleted TaskAction is held back: one created and
// deleted within the same second is let go only once that second has passed
// (with a second's margin for the clocks), so that a successor of the same
// name is created in a later second and numbers its events from a later epoch
// (identityEpoch).
func releaseHold(ta *flytev1.TaskAction, now time.Time) time.Duration {
	created := ta.CreationTimestamp.Time
	if created.IsZero() || ta.DeletionTimestamp.Unix() != created.Unix() {
		return 0
	}
	return max(created.Truncate(time.Second).Add(2*time.Second).Sub(now), 0)
}
