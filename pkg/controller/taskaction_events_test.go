package controller

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
)

// TestEventVersionsUniquePerAttemptAcrossCrashes is issue 10, item 8: after
// a crash between an acknowledged event and its status write, the next
// reconcile decides from the same status; whatever it reports then never
// shares (attempt, version) with a different phase, and the same phase is
// re-sent with the same version (the service stores it once).
func TestEventVersionsUniquePerAttemptAcrossCrashes(t *testing.T) {
	ta := newTA(0)
	launch := func(obs plugin.Observation) Plan {
		w := worldOf(t, ta, ours("pod-1", t0, obs))
		w.Launch = &launchOutcome{}
		return testDecider.decide(w, t0)
	}
	queued := launch(plugin.Observation{Phase: plugin.PhaseQueued})
	// Crash: QUEUED acknowledged, status not written. The pod runs meanwhile.
	afterCrash := testDecider.decide(worldOf(t, ta, ours("pod-1", t0, running(t0.Add(time.Second)))), t0.Add(time.Second))
	// The recorded history starts with the pod's Queued, re-sent as it was.
	if len(afterCrash.Events) != 2 || !reflect.DeepEqual(afterCrash.Events[0], queued.Events[0]) {
		t.Fatalf("after the crash: events %s, want the same QUEUED again, then RUNNING", evs(afterCrash.Events))
	}
	q, r := queued.Events[0], afterCrash.Events[1]
	if q.Attempt == r.Attempt && q.Version == r.Version {
		t.Fatalf("QUEUED and RUNNING of attempt %d share version %d", q.Attempt, q.Version)
	}
	again := launch(plugin.Observation{Phase: plugin.PhaseQueued})
	if again.Events[0].Version != q.Version {
		t.Errorf("the re-sent QUEUED has version %d, first %d", again.Events[0].Version, q.Version)
	}
	// Along a run, versions increase and identify one phase each.
	ta = applied(ta, afterCrash)
	seen := map[int32]events.Phase{r.Version: r.Phase}
	last := r.Version
	for i, obs := range []plugin.Observation{
		{Phase: plugin.PhaseRunning, Message: "still", OccurredAt: t0.Add(2 * time.Second)},
		{Phase: plugin.PhaseInitializing, Message: "restarting", OccurredAt: t0.Add(3 * time.Second)},
		running(t0.Add(4 * time.Second)),
		succeeded(t0.Add(5 * time.Second)),
	} {
		p := testDecider.decide(worldOf(t, ta, ours("pod-1", t0, obs)), t0.Add(time.Duration(i+2)*time.Second))
		for _, e := range p.Events {
			if ph, ok := seen[e.Version]; ok && ph != e.Phase {
				t.Errorf("version %d used by %s and %s", e.Version, ph, e.Phase)
			}
			if e.Version <= last {
				t.Errorf("version %d after %d", e.Version, last)
			}
			seen[e.Version], last = e.Phase, e.Version
		}
		ta = applied(ta, p)
	}
}

// TestEveryHistoryEntryHasItsEvent replays the outage of issue 10, item 13:
// attempt 2 fails, attempt 3's pod is launched and finishes while the events
// service is down; afterwards the history and the events agree.
func TestEveryHistoryEntryHasItsEvent(t *testing.T) {
	s := &sim{t: t, ta: newTA(2)}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	// Attempt 1 fails, attempt 2 runs.
	w := World{Task: worldOf(t, s.ta, resource{}).Task, Launch: &launchOutcome{}}
	w.Pod = ours("a1", at(1), plugin.Observation{Phase: plugin.PhaseQueued})
	w.Pod.Name = "hello-0"
	s.step(w, at(1))
	w = World{Task: w.Task, Pod: ours("a1", at(1), userFailure(at(2)))}
	w.Pod.Name = "hello-0"
	s.step(w, at(2))
	w = World{Task: w.Task, Launch: &launchOutcome{}, Pod: ours("a2", at(3), plugin.Observation{Phase: plugin.PhaseQueued})}
	w.Pod.Name = "hello-1"
	s.step(w, at(3))
	// The outage begins; attempt 2 fails.
	s.outage = true
	w = World{Task: w.Task, Pod: ours("a2", at(3), userFailure(at(4)))}
	w.Pod.Name = "hello-1"
	s.step(w, at(4))
	// The outage ends: the failure of attempt 2 goes through (as attempt 3's QUEUED).
	s.outage = false
	s.step(w, at(6))
	// Attempt 3 is launched; QUEUED cannot be reported (a second outage), and its pod finishes.
	s.outage = true
	w = World{Task: w.Task, Launch: &launchOutcome{}, Pod: ours("a3", at(7), plugin.Observation{Phase: plugin.PhaseQueued})}
	w.Pod.Name = "hello-2"
	s.step(w, at(7))
	s.outage = false
	w = World{Task: w.Task, Pod: ours("a3", at(7), userFailure(at(8)))}
	w.Pod.Name = "hello-2"
	s.step(w, at(10))
	if !s.ta.Status.IsTerminal() || s.ta.Status.Attempts != 3 {
		t.Fatalf("not failed after 3 attempts: %+v", s.ta.Status)
	}
	checkHistoryHasEvents(t, s.ta.Status, s.acked)
	if got := evs(s.acked); !strings.HasSuffix(got, "2:QUEUED:v17 3:QUEUED:v1 3:QUEUED:v17 3:FAILED:v38") || strings.Contains(got, "1:FAILED") || strings.Contains(got, "2:FAILED") {
		t.Errorf("events = %s", got)
	}
}

// TestIdentityEpoch is issue 10, item 8 (second half): a TaskAction deleted
// and created again under the same run and action identity numbers its
// events from its own creation second, so none of them has the identity of
// an earlier incarnation's event, and they rank above them.
func TestIdentityEpoch(t *testing.T) {
	first, again := newTA(0), newTA(0)
	again.CreationTimestamp = metav1.NewTime(first.CreationTimestamp.Add(90 * time.Second))
	run := func(ta *flytev1.TaskAction) []events.Event {
		var out []events.Event
		w := worldOf(t, ta, ours("pod-1", t0, plugin.Observation{Phase: plugin.PhaseQueued}))
		w.Launch = &launchOutcome{}
		p := testDecider.decide(w, t0)
		out = append(out, p.Events...)
		ta = applied(ta, p)
		for _, obs := range []plugin.Observation{running(t0), succeeded(t0)} {
			p = testDecider.decide(worldOf(t, ta, ours("pod-1", t0, obs)), t0)
			out = append(out, p.Events...)
			ta = applied(ta, p)
		}
		return out
	}
	a, b := run(first), run(again)
	if evs(a) != evs(b) {
		t.Fatalf("the incarnations ran differently: %s and %s", evs(a), evs(b))
	}
	seen := map[string]bool{}
	for _, e := range a {
		seen[fmt.Sprintf("%d/%s/%d", e.Attempt, e.Phase, e.Version)] = true
	}
	for i, e := range b {
		if e.Version < 0 {
			t.Errorf("event %d: version %d does not fit the API's int32", i, e.Version)
		}
		if seen[fmt.Sprintf("%d/%s/%d", e.Attempt, e.Phase, e.Version)] {
			t.Errorf("event %d of the second incarnation has the identity of the first's: %d/%s/v%d", i, e.Attempt, e.Phase, e.Version)
		}
		if uint32(e.Version) <= uint32(a[len(a)-1].Version) {
			t.Errorf("event %d of the second incarnation (v%d) ranks below the first's last (v%d)", i, uint32(e.Version), uint32(a[len(a)-1].Version))
		}
	}
}

// TestVersionSequenceSaturates: details of one phase past the sequence's end
// are no longer reported (they would reuse a version); a new phase still is,
// with a version of its own.
func TestVersionSequenceSaturates(t *testing.T) {
	ta := runningTA(t, newTA(0))
	ta.Status.PluginPhaseVersion = identityEpoch(ta)<<15 | versionSeqMax<<4 | phaseOrdinal(events.PhaseRunning)
	detail := transition{attempt: 1, phase: plugin.PhaseRunning, message: "something new"}
	if changed(&ta.Status, detail) {
		t.Error("a detail of the same phase past the sequence's end is reported")
	}
	v := eventVersion(&ta.Status, identityEpoch(ta), 1, events.PhaseSucceeded)
	if v == ta.Status.PluginPhaseVersion || versionSeq(v) != versionSeqMax || v>>15 != identityEpoch(ta) || v > math.MaxInt32 {
		t.Errorf("SUCCEEDED after a saturated RUNNING: v%#x (RUNNING v%#x)", v, ta.Status.PluginPhaseVersion)
	}
}

// TestIdentityEpochWraps pins what the epoch tells apart (issue 31, item 17:
// the comment used to claim more): incarnations created within 2^16 s rank in
// creation order; ones created exactly a multiple of 2^16 s apart share an
// epoch, and only those.
func TestIdentityEpochWraps(t *testing.T) {
	at := func(d time.Duration) *flytev1.TaskAction {
		ta := newTA(0)
		ta.CreationTimestamp = metav1.NewTime(t0.Add(d))
		return ta
	}
	base := identityEpoch(at(0))
	for _, tc := range []struct {
		after time.Duration
		same  bool
	}{
		{time.Second, false}, {time.Hour, false}, {65535 * time.Second, false},
		{65536 * time.Second, true}, {65537 * time.Second, false}, {2 * 65536 * time.Second, true},
	} {
		if got := identityEpoch(at(tc.after)) == base; got != tc.same {
			t.Errorf("created %v later: same epoch %v, want %v", tc.after, got, tc.same)
		}
	}
	if e1, e2 := identityEpoch(at(time.Minute)), identityEpoch(at(time.Hour)); !(base < e1 && e1 < e2) {
		t.Errorf("within the window the epochs do not rank in creation order: %d %d %d", base, e1, e2)
	}
}
