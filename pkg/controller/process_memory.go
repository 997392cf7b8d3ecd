package controller

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/taskaction/executor/pkg/events"
)

// processMemory is all a reconciler keeps in memory beyond the informer
// caches. Everything else it decides from is in the API server, the events
// service and blob storage, which is why a crash at any line loses nothing
// and duplicates nothing. The argument, in one place:
//
//   - The order of apply: report (the events service acknowledges), then
//     persist (the status records what was reported and launched), then
//     destroy (objects, the cache reservation, the finalizer). A crash
//     between two steps leaves the evidence of the earlier one: an event
//     re-sent carries the same identity (attempt, phase, version), which the
//     service keeps once; a status written is the record the next reconcile
//     starts from; an object not yet deleted is found again by its name and
//     its controller reference's UID.
//   - Every object an attempt creates has a name fixed by the TaskAction and
//     the attempt, so a launch repeated after a crash finds its own object
//     (AlreadyExists, owned by us) instead of making a second; an object of
//     that name owned by another is never adopted or deleted.
//   - What this type remembers only makes a live process faster or quieter;
//     a new process needs none of it:
//     taskActionWrites and objectCreates (readYourWrites) keep a reconcile
//     from deciding from a cache older than our own last write, and let the
//     echo of our write wake nobody; a new process's informers start from a
//     fresh list, newer than any write of the old one.
//     released keeps a TaskAction whose finalizer we removed from being
//     reconciled again from the cache's last copy; a new process never sees
//     it, or sees it gone.
//     unwrittenEvents keeps events acknowledged while the status was held
//     back (not written) from being sent again; a new process re-sends them,
//     at most the held ones, each with an identity the service keeps once.
//     launches remembers the object launched for an attempt whose status
//     does not yet record the launch (Queued held back), so that its deletion
//     by someone else counts as a system failure; a new process relaunches
//     such an object without counting it: the one loss, bounded by the hold
//     (queuedStatusDelay), and documented.
//     heldStatuses lets the TaskActions whose statuses saturation held back
//     be woken when it ends (liftHeldStatuses) instead of looking again and
//     again; a new process reconciles every TaskAction once anyway, and each
//     hold has its own wake-up at its end.
//   - A status write clears unwrittenEvents and launches (the status is the
//     record again); a TaskAction gone from the cache clears all of it.
type processMemory struct {
	taskActionWrites *readYourWrites
	objectCreates    *readYourWrites
	released         *releasedTaskActions
	unwrittenEvents  *acknowledgedEvents
	launches         *launchesInFlight
	heldStatuses     *saturationHolds
}

func newProcessMemory() processMemory {
	return processMemory{
		taskActionWrites: newReadYourWrites(),
		objectCreates:    newReadYourWrites(),
		released:         newReleasedTaskActions(),
		unwrittenEvents:  newAcknowledgedEvents(),
		launches:         newLaunchesInFlight(),
		heldStatuses:     newSaturationHolds(),
	}
}

// forgetTaskAction drops what is kept of a TaskAction that is gone (an
// attempt object's entry goes when the object's own events arrive).
func (m processMemory) forgetTaskAction(key types.NamespacedName) {
	m.taskActionWrites.forget(key)
	m.released.forget(key)
	m.unwrittenEvents.forget(key)
	m.launches.forget(key)
	m.heldStatuses.forget(key)
}

// releasedTaskActions remembers the TaskActions this process let go (finalizer removed
// while deleting): the API server deletes them at once, but the write that
// deleted one does not always carry a newer resourceVersion, so the cache's
// last copy of it is recognised by UID until the deletion reaches the cache.
type releasedTaskActions struct {
	mu   sync.Mutex
	uids map[types.NamespacedName]types.UID
}

func newReleasedTaskActions() *releasedTaskActions {
	return &releasedTaskActions{uids: map[types.NamespacedName]types.UID{}}
}

func (g *releasedTaskActions) add(key types.NamespacedName, uid types.UID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.uids[key] = uid
}

// has says whether the object at key with uid was let go; a new object of the
// same name clears the entry.
func (g *releasedTaskActions) has(key types.NamespacedName, uid types.UID) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old, ok := g.uids[key]
	if ok && old != uid {
		delete(g.uids, key)
		return false
	}
	return ok
}

func (g *releasedTaskActions) forget(key types.NamespacedName) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.uids, key)
}

// acknowledgedEvents remembers, per TaskAction, the events the events service
// acknowledged while no status was written (a held-back status), so that the
// reconciles meanwhile do not send them again: an event of an identity
// (attempt, phase, version) already acknowledged is skipped even when its
// details differ (a running pod's log context gains its containers' times),
// since the identity is what the service keeps one event of. A restart
// forgets; what it then re-sends is computed from the same pod again.
type acknowledgedEvents struct {
	mu   sync.Mutex
	sent map[types.NamespacedName]acked
}

type acked struct {
	uid    types.UID
	events []events.Event
}

func newAcknowledgedEvents() *acknowledgedEvents {
	return &acknowledgedEvents{sent: map[types.NamespacedName]acked{}}
}

func (a *acknowledgedEvents) acknowledged(key types.NamespacedName, uid types.UID, ev events.Event) bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.sent[key]
	if !ok || e.uid != uid {
		return false
	}
	return slices.ContainsFunc(e.events, func(s events.Event) bool { return sameIdentity(s, ev) })
}

func (a *acknowledgedEvents) add(key types.NamespacedName, uid types.UID, evs []events.Event) {
	if a == nil || len(evs) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.sent[key]
	if e.uid != uid {
		e = acked{uid: uid}
	}
	for _, ev := range evs {
		if !slices.ContainsFunc(e.events, func(s events.Event) bool { return sameIdentity(s, ev) }) {
			e.events = append(e.events, ev)
		}
	}
	a.sent[key] = e
}

func (a *acknowledgedEvents) forget(key types.NamespacedName) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sent, key)
}

// sameIdentity says whether two events of one TaskAction are the same
// event to the events service: the same attempt, phase and version.
func sameIdentity(a, b events.Event) bool {
	return a.Attempt == b.Attempt && a.Phase == b.Phase && a.Version == b.Version
}

// launchesInFlight remembers, per TaskAction, the pod this process launched
// while no status records that launch yet (its Queued is held back,
// deferQueued). A pod that disappears then was deleted by someone else, as
// when its launch is recorded: the system failure is counted, not lost. The
// first status write makes the status the record again (forget). Lost with
// the process: after a restart such a pod is relaunched uncounted.
type launchesInFlight struct {
	mu sync.Mutex
	m  map[types.NamespacedName]launchRecord
}

// launchRecord is one launch: the TaskAction (by UID), the attempt, the pod.
type launchRecord struct {
	TA      types.UID
	Attempt uint32
	Pod     types.UID
	Created time.Time
}

func newLaunchesInFlight() *launchesInFlight {
	return &launchesInFlight{m: map[types.NamespacedName]launchRecord{}}
}

func (l *launchesInFlight) launched(key types.NamespacedName, rec launchRecord) {
	if l == nil || rec.Pod == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[key] = rec
}

// get is the launch of attempt of the TaskAction ta (nil: none remembered).
func (l *launchesInFlight) get(key types.NamespacedName, ta types.UID, attempt uint32) *launchRecord {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, ok := l.m[key]
	if !ok || rec.TA != ta || rec.Attempt != attempt {
		return nil
	}
	return &rec
}

func (l *launchesInFlight) forget(key types.NamespacedName) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, key)
}

// saturationHolds remembers the TaskActions whose status is held back because
// the executor is saturated (Plan.HeldWhileSaturated), and which of them were
// lifted: woken once the saturation ended, to be written then even if it came
// back meanwhile (it would hold them again, and each lift would wake them
// again for nothing).
type saturationHolds struct {
	mu sync.Mutex
	m  map[types.NamespacedName]saturationHold
	// unlifted counts the entries not lifted yet.
	unlifted int
}

type saturationHold struct {
	uid    types.UID
	lifted bool
}

func newSaturationHolds() *saturationHolds {
	return &saturationHolds{m: map[types.NamespacedName]saturationHold{}}
}

// note records whether the plan just applied for the TaskAction uid at key
// holds its status back while saturated.
func (h *saturationHolds) note(key types.NamespacedName, uid types.UID, held bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lockedForget(key)
	if held {
		h.m[key] = saturationHold{uid: uid}
		h.unlifted++
	}
}

// lifted says whether the hold of the TaskAction uid at key was lifted.
func (h *saturationHolds) lifted(key types.NamespacedName, uid types.UID) bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.m[key]
	return ok && e.uid == uid && e.lifted
}

// lift marks every hold lifted and returns the keys of those not lifted before.
func (h *saturationHolds) lift() []types.NamespacedName {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unlifted == 0 {
		return nil
	}
	keys := make([]types.NamespacedName, 0, h.unlifted)
	for k, e := range h.m {
		if !e.lifted {
			h.m[k] = saturationHold{uid: e.uid, lifted: true}
			keys = append(keys, k)
		}
	}
	h.unlifted = 0
	return keys
}

// waiting says whether any hold is not lifted yet.
func (h *saturationHolds) waiting() bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unlifted > 0
}

func (h *saturationHolds) forget(key types.NamespacedName) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lockedForget(key)
}

func (h *saturationHolds) lockedForget(key types.NamespacedName) {
	if e, ok := h.m[key]; ok {
		if !e.lifted {
			h.unlifted--
		}
		delete(h.m, key)
	}
}
