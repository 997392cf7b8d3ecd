package controller

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
)

func TestPluginStateRoundTrip(t *testing.T) {
	retry := metav1.NewTime(t0)
	for _, s := range []attemptState{
		{Attempt: 2},
		{Attempt: 1, Pod: "u1"},
		{Attempt: 3, Discarded: "u2", RetryAt: &retry, QuotaWaits: 2},
	} {
		st := &flytev1.TaskActionStatus{}
		writeState(st, s)
		got := readState(st, s.Attempt)
		if fmt.Sprint(got) != fmt.Sprint(s) {
			t.Errorf("round trip %+v → %+v", s, got)
		}
		if other := readState(st, s.Attempt+1); other != (attemptState{Attempt: s.Attempt + 1}) {
			t.Errorf("state of attempt %d read for attempt %d: %+v", s.Attempt, s.Attempt+1, other)
		}
	}
	// Bytes another writer put there read as a fresh state.
	st := &flytev1.TaskActionStatus{PluginState: []byte{0xff, 0x00}, PluginStateVersion: 1}
	if got := readState(st, 1); got != (attemptState{Attempt: 1}) {
		t.Errorf("garbage read as %+v", got)
	}
}

// TestOwnView: the attempt count and cache status the executor decides from
// are its own record's; before its first write, nothing another writer put
// there; a status an older executor wrote (no record of this version) as is.
func TestOwnView(t *testing.T) {
	var rec flytev1.TaskActionStatus
	rec.Attempts, rec.CacheStatus = 2, flytev1.CacheMiss
	rec.PhaseHistory = []flytev1.PhaseTransition{{Phase: flytev1.ReasonQueued}}
	writeState(&rec, attemptState{Attempt: 2, Pod: "p"})
	sealRecord(&rec)
	for _, tc := range []struct {
		name          string
		st            flytev1.TaskActionStatus
		attempts      uint32
		cache         flytev1.CacheStatus
		statePod      string
		stateAttempts uint32
	}{
		{"nothing written by the executor: another writer's values are not its own",
			flytev1.TaskActionStatus{Attempts: 4, CacheStatus: flytev1.CacheSkipped}, 0, 0, "", 0},
		{"its record: another writer's attempts and cacheStatus replaced",
			func() flytev1.TaskActionStatus {
				s := *rec.DeepCopy()
				s.Attempts, s.CacheStatus = 5, flytev1.CacheSkipped
				return s
			}(),
			2, flytev1.CacheMiss, "p", 2},
		{"an older executor's status (record version 1): as it is",
			flytev1.TaskActionStatus{Attempts: 3, CacheStatus: flytev1.CacheHit, PluginStateVersion: stateVersionAttemptOnly,
				PluginState: []byte(`{"attempt":3,"pod":"q"}`), PhaseHistory: []flytev1.PhaseTransition{{Phase: flytev1.ReasonQueued}}},
			3, flytev1.CacheHit, "q", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := *tc.st.DeepCopy()
			ownView(&st)
			if st.Attempts != tc.attempts || st.CacheStatus != tc.cache || string(readState(&st, tc.stateAttempts).Pod) != tc.statePod {
				t.Errorf("attempts %d, cacheStatus %s, state %+v; want %d, %s, pod %q", st.Attempts, st.CacheStatus, readState(&st, tc.stateAttempts), tc.attempts, tc.cache, tc.statePod)
			}
		})
	}
}
