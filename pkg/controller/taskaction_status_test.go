package controller

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
)

// sim runs decisions with apply's semantics and no I/O: a plan's events are
// acknowledged (or not, during an outage) before its status is kept.
type sim struct {
	t      *testing.T
	ta     *flytev1.TaskAction
	acked  []events.Event
	outage bool
}

func (s *sim) step(w World, now time.Time) Plan {
	s.t.Helper()
	w.TA = s.ta
	p := testDecider.decide(w, now)
	if s.outage && len(p.Events) > 0 {
		return p // reporting failed: nothing persisted
	}
	s.acked = append(s.acked, p.Events...)
	s.ta = applied(s.ta, p)
	return p
}

// checkHistoryHasEvents is issue 10, item 13: every history entry has its
// acknowledged event, in order, and the history's times are in order.
func checkHistoryHasEvents(t *testing.T, st flytev1.TaskActionStatus, acked []events.Event) {
	t.Helper()
	phaseOf := map[string][]events.Phase{
		flytev1.ReasonQueued:       {events.PhaseQueued, events.PhaseWaitingForResources},
		flytev1.ReasonInitializing: {events.PhaseInitializing},
		flytev1.ReasonExecuting:    {events.PhaseRunning},
		flytev1.ReasonCompleted:    {events.PhaseSucceeded},
		// A retried attempt's failure is the next attempt's QUEUED, with the error.
		flytev1.ReasonRetryableFailure: {events.PhaseQueued},
		flytev1.ReasonPermanentFailure: {events.PhaseFailed},
		flytev1.ReasonTimedOut:         {events.PhaseTimedOut},
	}
	i := 0
	for k, h := range st.PhaseHistory {
		if k > 0 && h.OccurredAt.Before(&st.PhaseHistory[k-1].OccurredAt) {
			t.Errorf("history out of order: %s at %v after %s at %v", h.Phase, h.OccurredAt, st.PhaseHistory[k-1].Phase, st.PhaseHistory[k-1].OccurredAt)
		}
		found := false
		for ; i < len(acked) && !found; i++ {
			for _, p := range phaseOf[h.Phase] {
				found = found || (acked[i].Phase == p && (h.Phase != flytev1.ReasonRetryableFailure || acked[i].Error != nil))
			}
		}
		if !found {
			t.Errorf("history entry %d (%s) has no acknowledged event in order; events %s, history %s", k, h.Phase, evs(acked), history(st))
		}
	}
}

// TestEarlierAttemptPodsAreCleanedUpLevelTriggered is issue 10, item 14: the
// pod of a failed attempt whose delete was lost (a crash after the status
// write) is deleted by every later reconcile, derived from the durable status.
func TestEarlierAttemptPodsAreCleanedUpLevelTriggered(t *testing.T) {
	ta := runningTA(t, newTA(2))
	p := testDecider.decide(worldOf(t, ta, ours("pod-1", t0, userFailure(t0.Add(time.Minute)))), t0.Add(time.Minute))
	ta = applied(ta, p) // crash: the delete of pod-1 never happened
	for _, tc := range []struct {
		name string
		pod  resource
	}{
		{"before the next launch", resource{}},
		{"while attempt 2 runs", ours("pod-2", t0, running(t0.Add(2*time.Minute)))},
	} {
		w := worldOf(t, ta, tc.pod)
		w.Others = []resource{{Name: "hello-0", Holder: holderUs, UID: "pod-1"}}
		p := testDecider.decide(w, t0.Add(3*time.Minute))
		if len(p.Delete) != 1 || p.Delete[0].UID != "pod-1" {
			t.Errorf("%s: deletes = %+v, want pod-1", tc.name, p.Delete)
		}
		ta = applied(ta, p)
	}
}

func TestHistoryIsBoundedAndKeepsItsStart(t *testing.T) {
	st := &flytev1.TaskActionStatus{}
	for i := 0; i < 3*maxHistory; i++ {
		phase := plugin.PhaseRunning
		if i%2 == 0 {
			phase = plugin.PhaseQueued
		}
		record(st, transition{attempt: 1, phase: phase, at: t0.Add(time.Duration(i) * time.Second),
			err: &plugin.ExecError{Message: strings.Repeat("é", 1000)}}, uint32(i), t0)
	}
	if n := len(st.PhaseHistory); n != maxHistory {
		t.Errorf("history has %d entries, want %d", n, maxHistory)
	}
	if !st.PhaseHistory[0].OccurredAt.Equal(&metav1.Time{Time: t0}) {
		t.Errorf("first entry %v, want the start", st.PhaseHistory[0])
	}
	for _, h := range st.PhaseHistory {
		if len(h.Message) > maxHistoryMessage || !strings.HasSuffix(h.Message, "...") || strings.ContainsRune(h.Message, '\uFFFD') {
			t.Errorf("history message of %d bytes: %q", len(h.Message), h.Message[:20])
		}
	}
}

// TestEndRecordedWhenRecorded (issue 10, GC TTL): a pod that ended long ago
// (the events service was down) is recorded as ended now: the terminal
// condition carries the time of the record, which the garbage collector's
// TTL counts from, and the history keeps when the pod ended.
func TestEndRecordedWhenRecorded(t *testing.T) {
	ta := runningTA(t, newTA(0))
	ended := t0.Add(time.Minute)
	now := ended.Add(3 * time.Hour)
	p := testDecider.decide(worldOf(t, ta, ours("pod-1", t0, succeeded(ended))), now)
	done := applied(ta, p)
	at, ok := done.Status.CompletedAt()
	if !ok || !at.Equal(now) {
		t.Errorf("recorded end = %v (%v), want %v", at, ok, now)
	}
	last := done.Status.PhaseHistory[len(done.Status.PhaseHistory)-1]
	if !last.OccurredAt.Time.Equal(ended) {
		t.Errorf("history says it ended at %v, want %v", last.OccurredAt, ended)
	}
}

func TestReleaseHold(t *testing.T) {
	created := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		deleted, now time.Time
		want         time.Duration
	}{
		{"deleted in a later second", created.Add(time.Second), created.Add(time.Second), 0},
		{"deleted in its creation second", created.Add(300 * time.Millisecond), created.Add(400 * time.Millisecond), 1600 * time.Millisecond},
		{"that second and the margin passed", created.Add(300 * time.Millisecond), created.Add(2 * time.Second), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := newTA(0)
			ta.CreationTimestamp = metav1.NewTime(created)
			ta.DeletionTimestamp = &metav1.Time{Time: tc.deleted}
			if got := releaseHold(ta, tc.now); got != tc.want {
				t.Errorf("releaseHold = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTerminalStatusIsSmall: every status patch and every watch event of a
// TaskAction carries its whole status, so the status of an ended one stays a
// few hundred bytes, and a long error message is kept truncated in the
// Failed condition (for kubectl) and errorState (Flyte's field), not again in
// the history.
func TestTerminalStatusIsSmall(t *testing.T) {
	ended := func(t *testing.T, final plugin.Observation) flytev1.TaskActionStatus {
		ta := newTA(0)
		w := worldOf(t, ta, ours("pod-1", t0, plugin.Observation{Phase: plugin.PhaseQueued}))
		w.Launch = &launchOutcome{}
		ta = applied(ta, testDecider.decide(w, t0))
		ta = applied(ta, testDecider.decide(worldOf(t, ta, ours("pod-1", t0, running(t0.Add(time.Second)))), t0.Add(time.Second)))
		p := testDecider.decide(worldOf(t, ta, ours("pod-1", t0, final)), t0.Add(3*time.Second))
		if !p.Status.IsTerminal() {
			t.Fatalf("not ended: %s", historyOf(p.Status))
		}
		return p.Status
	}
	long := strings.Repeat("Traceback line that a task printed before it died. ", 2000) // ~100 KB
	failed := userFailure(t0.Add(3 * time.Second))
	failed.Message, failed.Error.Message = long, long
	for _, c := range []struct {
		name  string
		final plugin.Observation
		max   int
	}{
		{"succeeded", succeeded(t0.Add(3 * time.Second)), 1500},
		{"failed with a 100 KB message", failed, 1500 + maxErrorMessage + maxConditionMessage},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := ended(t, c.final)
			raw, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d bytes", len(raw))
			if len(raw) > c.max {
				t.Errorf("status of %d bytes, want at most %d: %s", len(raw), c.max, raw)
			}
			if h := st.PhaseHistory[len(st.PhaseHistory)-1]; h.Message != "" {
				t.Errorf("the last history entry repeats the message the condition and errorState hold: %.40q", h.Message)
			}
		})
	}
}
