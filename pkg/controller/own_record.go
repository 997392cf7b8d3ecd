package controller

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/cache"
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
