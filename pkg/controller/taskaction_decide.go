package controller

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// decider holds the settings decisions depend on. decide is a pure function
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
		d.settle(p, w, now, ends(transition{attempt: attempt, phase: plugin.PhasePermanentFailure, at: now,
			err: &plugin.ExecError{Code: CodeForeignResource, Kind: flytev1.ErrorKindUser, Message: fmt.Sprintf(
				"pod %s/%s exists and is not controlled by this TaskAction: the executor will not delete or adopt it; rename the TaskAction or remove that pod",
				w.TA.Namespace, pod.Name)}}))
	case pod.Holder == holderPreviousTaskAction:
		// A pod of an earlier TaskAction of the same name: the garbage collector removes it.
		d.settle(p, w, now, verdict{kind: verdictProgress, state: s, wake: d.Backoff, t: transition{attempt: attempt, phase: plugin.PhaseQueued, at: now,
			message: fmt.Sprintf("waiting for pod %s of an earlier TaskAction of the same name to be deleted", pod.Name)}})
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
		d.settle(p, w, now, verdict{kind: verdictSystemFailure, state: s, cause: &plugin.ExecError{Code: CodeResourceDeletedExternally, Kind: flytev1.ErrorKindSystem,
			Message: fmt.Sprintf("pod %s/%s was deleted by someone other than the executor", w.TA.Namespace, pod.Name)}})
	default:
		d.beforeLaunch(p, w, now, s)
	}
}

// beforeLaunch: the attempt's try has no object yet. The policies are asked
// in order (a quota wait past the timeout, a backoff, a failed launch,
// unreadable inputs, the cache's answer); when none decides, launch.
func (d decider) beforeLaunch(p *Plan, w World, now time.Time, s attemptState) {
	attempt := max(p.Status.Attempts, 1)
	if d.settleFirst(p, w, now,
		quotaWaitTimeout(w, now, s, attempt),
		backoffPending(s, now),
		d.launchFailure(w, now, s, attempt),
		inputsUnreadable(w, s)) {
		return
	}
	d.noteCacheAnswer(p, w) // in the status whatever the answer decides
	if d.settleFirst(p, w, now, d.cacheVerdict(w, now, s, attempt)) {
		return
	}
	p.Launch = true
}

// observe follows the attempt's object: its observation, as the runtime's
// error.pb and the timeout amend it, is the verdict; while it runs, its
// reservation is kept and its first states may be held back.
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
	if d.settleFirst(p, w, now, runtimeErrorUnreadable(w, obs, s)) {
		return
	}
	obs, deadline := attemptTimeout(w, now, s, withRuntimeError(obs, w.RuntimeError), attempt)
	p.wake(deadline)
	obs = explained(obs)
	// A pod that says nothing of when its phase began began with the pod: the
	// same time however often (and however late) the transition is reported.
	t := transition{attempt: attempt, phase: obs.Phase, message: obs.Message, err: obs.Error, at: occurred(obs, w.Pod.Created, now)}
	if created && t.phase == plugin.PhaseQueued && t.err == nil {
		t = podCreated(w)
	}
	v := observationVerdict(w, obs, s, t)
	d.settle(p, w, now, v)
	if v.kind == verdictProgress {
		d.keepReservation(p, w)
		if mayHoldBack {
			d.holdRunning(p, w, now, t)
		}
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
