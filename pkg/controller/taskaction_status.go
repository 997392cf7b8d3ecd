package controller

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
)

// Error codes the reconciler itself produces.
const (
	CodeInvalidSpec               = "InvalidSpec"
	CodePluginNotFound            = "PluginNotFound"
	CodeTimeout                   = "Timeout"
	CodeResourceDeletedExternally = plugin.CodeResourceDeletedExternally
	CodeMaxSystemFailuresExceeded = "MaxSystemFailuresExceeded"
	CodeSystemError               = "SystemError"
	CodeForeignResource           = "ResourceNameTaken"
	CodeLaunchRefused             = "LaunchRefused"
	CodeDuplicateAction           = "DuplicateAction"
	// CodeStorageError: blob storage could not be read (inputs, error.pb).
	CodeStorageError = "StorageError"
)

// Limits that keep the status small (etcd's object limit, and every watcher
// of the object pays for its size).
const (
	maxHistory          = 16
	maxHistoryMessage   = 256
	maxConditionMessage = 1024
	maxErrorMessage     = 4096
)

// attemptState is the executor's state of one attempt, part of its record
// in status.pluginState (ownRecord). A state of another attempt reads as empty.
type attemptState struct {
	Attempt uint32 `json:"attempt"`
	// Pod is the UID of the pod of the attempt's current try, once its launch
	// (or adoption) is recorded: a missing pod then was deleted by someone else.
	Pod types.UID `json:"pod,omitempty"`
	// Discarded is the UID of a failed try's pod whose system failure is
	// already counted: it is deleted, never adopted again.
	Discarded types.UID `json:"discarded,omitempty"`
	// RetryAt holds back the next launch (system-failure or quota backoff).
	RetryAt *metav1.Time `json:"retryAt,omitempty"`
	// QuotaWaits counts consecutive quota refusals of the launch (backoff).
	QuotaWaits uint32 `json:"quotaWaits,omitempty"`
	// WaitingSince is when the attempt's launch was first refused for quota:
	// its timeout counts from then while it has no pod.
	WaitingSince *metav1.Time `json:"waitingSince,omitempty"`
}

// ownRecord is status.pluginState: what the executor keeps of its own in the
// status. Other writers also write the status: Flyte's actions service
// replaces attempts and cacheStatus with its own view (a full update), so the
// executor keeps its own attempt count and cache observation here and takes
// them, not those fields, for what it decides and reports; its next status
// write puts its own values back (as Flyte's executor does).
type ownRecord struct {
	attemptState
	// Cache is the executor's own cache observation (status.cacheStatus).
	Cache flytev1.CacheStatus `json:"cache,omitempty"`
	// Reservation is the cache key under which this TaskAction holds a cache
	// reservation: it is released (or kept alive) under that key, whatever
	// the spec says by then (edited, or no longer decodable).
	Reservation *cache.Key `json:"reservation,omitempty"`
}

// Versions of status.pluginState: 1 held the attempt state alone (an older
// executor's; its status fields are its own record), 2 the whole ownRecord.
const (
	stateVersionAttemptOnly = 1
	stateVersion            = 2
)

// readRecord decodes the executor's record; ok is false when the status holds
// none of this version (nothing written yet, an older executor's, another
// writer's bytes).
func readRecord(st *flytev1.TaskActionStatus) (rec ownRecord, ok bool) {
	switch {
	case len(st.PluginState) == 0:
		return ownRecord{}, false
	case st.PluginStateVersion == stateVersion:
		if json.Unmarshal(st.PluginState, &rec) != nil {
			return ownRecord{}, false
		}
		return rec, true
	case st.PluginStateVersion == stateVersionAttemptOnly:
		if json.Unmarshal(st.PluginState, &rec.attemptState) != nil {
			return ownRecord{}, false
		}
		// Its attempt state, and no record of the rest: the status fields stand.
		rec.Cache = st.CacheStatus
		return rec, false
	}
	return ownRecord{}, false
}

// ownView is the status as the executor recorded it: the attempt count and
// cache status another writer may have replaced are taken from its record.
// A status the executor has not written yet (no history, no record) is its
// own from scratch: another writer's attempts or cacheStatus there are not
// the executor's observation either. One an older executor wrote (a record of
// version 1) is taken as it is.
func ownView(st *flytev1.TaskActionStatus) {
	rec, ok := readRecord(st)
	switch {
	case ok:
		st.Attempts, st.CacheStatus = rec.Attempt, rec.Cache
	case len(st.PhaseHistory) == 0 && len(st.Conditions) == 0 && len(st.PluginState) == 0:
		st.Attempts, st.CacheStatus = 0, flytev1.CacheStatus(0)
	}
}

// readState decodes the executor's state for attempt; anything unreadable
// (another writer's bytes) reads as a fresh state.
func readState(st *flytev1.TaskActionStatus, attempt uint32) attemptState {
	rec, _ := readRecord(st)
	s := rec.attemptState
	if s.Attempt != attempt {
		s = attemptState{}
	}
	s.Attempt = attempt
	return s
}

// writeState replaces the state of the record's attempt.
func writeState(st *flytev1.TaskActionStatus, s attemptState) {
	rec, _ := readRecord(st)
	rec.attemptState = s
	encodeRecord(st, rec)
}

// sealRecord writes the executor's record of the status it is about to
// persist: its attempt count and cache status as the status now says, the
// attempt state if it is this attempt's, and the reservation.
func sealRecord(st *flytev1.TaskActionStatus) {
	rec, _ := readRecord(st)
	if rec.Attempt != st.Attempts {
		rec.attemptState = attemptState{}
	}
	rec.Attempt, rec.Cache = st.Attempts, st.CacheStatus
	encodeRecord(st, rec)
}

func encodeRecord(st *flytev1.TaskActionStatus, rec ownRecord) {
	b, err := json.Marshal(rec)
	if err != nil { // cannot happen for this type
		panic(fmt.Sprintf("encode plugin state: %v", err))
	}
	st.PluginState, st.PluginStateVersion = b, stateVersion
}

// reservationOf is the key of the cache reservation the record says this
// TaskAction holds (nil: none recorded).
func reservationOf(st *flytev1.TaskActionStatus) *cache.Key {
	rec, _ := readRecord(st)
	return rec.Reservation
}

// setReservation records (or, with nil, forgets) the reservation's key.
func setReservation(st *flytev1.TaskActionStatus, k *cache.Key) {
	rec, _ := readRecord(st)
	if equalKeys(rec.Reservation, k) {
		return
	}
	rec.Reservation = k
	encodeRecord(st, rec)
}

func equalKeys(a, b *cache.Key) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// transition is one reported change of an attempt.
type transition struct {
	attempt uint32
	phase   plugin.Phase
	message string
	err     *plugin.ExecError
	// at is when it happened (a pod's finish time); the conditions carry when it was recorded.
	at time.Time
	// final marks the TaskAction's last transition; reason is its condition reason.
	final  bool
	reason string
	// outputURI overrides where the event says the outputs are (a cache hit).
	outputURI string
	// cacheSource is the attempt whose outputs a cache hit served.
	cacheSource *cache.Source
	// paused: a condition action waiting for its signal.
	paused bool
	// podCreated: the Queued of a new pod, reported the same whenever it is
	// computed (podCreated), so without the pod's log context, which changes
	// as it starts; the later events carry it.
	podCreated bool
}

// eventPhase maps a transition to the phase an event reports.
func eventPhase(t transition) events.Phase {
	if t.paused {
		return events.PhasePaused
	}
	switch t.phase {
	case plugin.PhaseQueued, plugin.PhaseNotStarted:
		return events.PhaseQueued
	case plugin.PhaseWaitingForResources:
		return events.PhaseWaitingForResources
	case plugin.PhaseInitializing:
		return events.PhaseInitializing
	case plugin.PhaseRunning:
		return events.PhaseRunning
	case plugin.PhaseSucceeded:
		return events.PhaseSucceeded
	}
	switch t.reason {
	case flytev1.ReasonTimedOut:
		return events.PhaseTimedOut
	case flytev1.ReasonAborted:
		return events.PhaseAborted
	}
	return events.PhaseFailed
}

// phaseOrdinal numbers the event phases for versions (at most 15).
func phaseOrdinal(p events.Phase) uint32 {
	switch p {
	case events.PhaseQueued:
		return 1
	case events.PhaseWaitingForResources:
		return 2
	case events.PhaseInitializing:
		return 3
	case events.PhaseRunning:
		return 4
	case events.PhaseSucceeded:
		return 5
	case events.PhaseFailed:
		return 6
	case events.PhaseAborted:
		return 7
	case events.PhaseTimedOut:
		return 8
	case events.PhasePaused:
		return 9
	}
	return 15
}

// An event's version: the epoch of the TaskAction's identity in 16 bits, a
// sequence number in the next 11, the phase in the low 4: 31 bits, as the
// status's pluginPhaseVersion is an int32 in the API.
const (
	versionPhaseBits = 4
	versionSeqBits   = 11
	versionSeqMax    = 1<<versionSeqBits - 1
	versionEpochMask = 1<<16 - 1
)

// identityEpoch tells apart the incarnations of one action identity
// (project, domain, run, action): a TaskAction deleted and created again under
// the same identity numbers its events from its own creation second, so the
// events service neither drops them as duplicates of the earlier one's nor
// ranks them below (its latest event of an attempt is the highest version).
// Creation seconds count modulo 2^16 (about 18 hours): within that window a
// later incarnation ranks above an earlier one; beyond it the ranking wraps,
// and two incarnations created a multiple of 2^16 s apart, to the second,
// share an epoch, so the later one's events that match an earlier one's in
// attempt, sequence and phase are dropped as duplicates (1 chance in 65,536
// for a re-creation at a random time more than 18 hours later). Nothing the
// executor can see tells such incarnations apart (the earlier one is long
// gone), and the version has no bits to spare (31, an int32 in the API). The
// same second twice is ruled out: see releaseHold and duplicateOf.
func identityEpoch(ta *flytev1.TaskAction) uint32 {
	if ta.CreationTimestamp.IsZero() {
		return 0
	}
	return uint32(ta.CreationTimestamp.Unix()) & versionEpochMask
}

// eventVersion numbers the next event of attempt: the identity's epoch, a
// sequence number derived from the durable status, and the phase. An event
// re-sent after a crash before its status write carries the same version
// again (the service stores it once), and two different phases of one attempt
// never share a version, whatever crashed in between.
func eventVersion(st *flytev1.TaskActionStatus, epoch, attempt uint32, p events.Phase) uint32 {
	seq := uint32(0)
	if st.Attempts == attempt && st.PluginPhase != "" {
		seq = min(versionSeq(st.PluginPhaseVersion)+1, versionSeqMax)
	}
	return epoch<<(versionSeqBits+versionPhaseBits) | seq<<versionPhaseBits | phaseOrdinal(p)
}

// versionSeq is the sequence number of a recorded version.
func versionSeq(v uint32) uint32 { return v >> versionPhaseBits & versionSeqMax }

// historyName is the phaseHistory entry (and condition reason) of a transition.
func historyName(t transition) string {
	if t.final && t.reason != "" {
		return t.reason
	}
	if t.paused {
		return flytev1.ReasonPaused
	}
	switch t.phase {
	case plugin.PhaseQueued, plugin.PhaseWaitingForResources, plugin.PhaseNotStarted:
		return flytev1.ReasonQueued
	case plugin.PhaseInitializing:
		return flytev1.ReasonInitializing
	case plugin.PhaseRunning:
		return flytev1.ReasonExecuting
	case plugin.PhaseSucceeded:
		return flytev1.ReasonCompleted
	}
	return flytev1.ReasonRetryableFailure
}

// record writes transition t into st as of now (the time it is recorded):
// phase history, conditions, plugin phase and version, error state. version
// is the version of the event that reports t.
func record(st *flytev1.TaskActionStatus, t transition, version uint32, now time.Time) {
	name := historyName(t)
	at := metav1.NewTime(t.at.UTC().Truncate(time.Second))
	recorded := metav1.NewTime(now.UTC().Truncate(time.Second))
	n := len(st.PhaseHistory)
	if n > 0 && at.Before(&st.PhaseHistory[n-1].OccurredAt) {
		// The timeline stays in order even when a pod's clock or a late
		// observation says otherwise.
		at = st.PhaseHistory[n-1].OccurredAt
	}
	if n == 0 || st.PhaseHistory[n-1].Phase != name {
		entry := flytev1.PhaseTransition{Phase: name, OccurredAt: at}
		if t.err != nil && !t.final {
			// The condition and errorState carry the full text; the history
			// only a hint of an earlier attempt's error (the final one is in
			// both already).
			entry.Message = truncate(t.err.Message, maxHistoryMessage)
		}
		st.PhaseHistory = boundHistory(append(st.PhaseHistory, entry))
	}
	st.PluginPhase = string(t.phase)
	st.PluginPhaseVersion = version
	if t.err != nil {
		st.ErrorState = &flytev1.ErrorState{Code: t.err.Code, Kind: t.err.Kind, Message: truncate(t.err.Message, maxErrorMessage)}
	} else if t.final && t.phase == plugin.PhaseSucceeded {
		st.ErrorState = nil
	}
	msg := t.message
	if msg == "" && t.err != nil {
		msg = t.err.Message
	}
	switch {
	case t.final && t.phase == plugin.PhaseSucceeded:
		setCondition(st, flytev1.ConditionProgressing, metav1.ConditionFalse, name, "TaskAction has completed", recorded)
		setCondition(st, flytev1.ConditionSucceeded, metav1.ConditionTrue, name, msg, recorded)
	case t.final:
		// The message once in the Failed condition (and in full in errorState), not again here.
		setCondition(st, flytev1.ConditionProgressing, metav1.ConditionFalse, name, "TaskAction has ended: "+name, recorded)
		setCondition(st, flytev1.ConditionFailed, metav1.ConditionTrue, name, msg, recorded)
	default:
		setCondition(st, flytev1.ConditionProgressing, metav1.ConditionTrue, name, msg, recorded)
	}
}

// boundHistory keeps the first entry (when it all began) and the latest ones.
func boundHistory(h []flytev1.PhaseTransition) []flytev1.PhaseTransition {
	if len(h) <= maxHistory {
		return h
	}
	out := make([]flytev1.PhaseTransition, 0, maxHistory)
	out = append(out, h[0])
	return append(out, h[len(h)-maxHistory+1:]...)
}

// setCondition sets a condition; its lastTransitionTime is when the executor
// recorded the change, kept while the status does not change.
func setCondition(st *flytev1.TaskActionStatus, typ string, status metav1.ConditionStatus, reason, msg string, at metav1.Time) {
	if reason == "" {
		reason = flytev1.ReasonQueued
	}
	c := metav1.Condition{Type: typ, Status: status, Reason: reason, Message: truncate(msg, maxConditionMessage), LastTransitionTime: at}
	if old := meta.FindStatusCondition(st.Conditions, typ); old != nil && old.Status == status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// progressing is the Progressing condition, if any.
func progressing(st *flytev1.TaskActionStatus) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, flytev1.ConditionProgressing)
}

func truncate(s string, n int) string { return plugin.Truncate(s, n) }
