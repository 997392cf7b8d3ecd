package controller

import (
	"fmt"
	"testing"
	"time"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    uint32
		want time.Duration
	}{{0, 10 * time.Second}, {1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second}, {10, 5 * time.Minute}, {1000, 5 * time.Minute}} {
		if got := backoff(10*time.Second, tc.n); got != tc.want {
			t.Errorf("backoff(10s, %d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// deletedWhileRunning is how the container plugin reads a running pod that
// someone deletes: a system failure, from a pod that ran.
func deletedWhileRunning(at time.Time) plugin.Observation {
	return plugin.Observation{Phase: plugin.PhaseRetryableFailure, Deleting: true, OccurredAt: at,
		Error: &plugin.ExecError{Code: CodeResourceDeletedExternally, Kind: flytev1.ErrorKindSystem, Message: "pod is being deleted"}}
}

// TestSystemFailureCeilingReachedByPodsThatRan is issue 10, item 4: the
// observation that reports a running pod deleted (or evicted) is not
// progress; a pod that keeps being deleted while it runs reaches the ceiling.
// The history stays bounded meanwhile.
func TestSystemFailureCeilingReachedByPodsThatRan(t *testing.T) {
	ta := newTA(0)
	now := t0
	for try := 1; try <= 10; try++ {
		uid := string(rune('a' + try))
		// Launch the try (after its backoff), see it run, see it deleted while running.
		now = now.Add(10 * time.Minute)
		w := worldOf(t, ta, ours(uid, now, plugin.Observation{Phase: plugin.PhaseQueued}))
		w.Launch = &launchOutcome{}
		ta = applied(ta, testDecider.decide(w, now))
		p := testDecider.decide(worldOf(t, ta, ours(uid, now, deletedWhileRunning(now.Add(time.Second)))), now.Add(time.Second))
		ta = applied(ta, p)
		if ta.Status.IsTerminal() {
			if try != 4 || ta.Status.ErrorState.Code != CodeMaxSystemFailuresExceeded {
				t.Fatalf("ended after try %d with %+v, want MaxSystemFailuresExceeded after the 4th", try, ta.Status.ErrorState)
			}
			if n := len(ta.Status.PhaseHistory); n > maxHistory {
				t.Errorf("phaseHistory has %d entries, bound %d", n, maxHistory)
			}
			return
		}
		if ta.Status.SystemFailures != uint32(try) {
			t.Fatalf("after try %d systemFailures = %d", try, ta.Status.SystemFailures)
		}
		// The discarded pod goes away before the relaunch.
		gone := ours(uid, now, deletedWhileRunning(now.Add(time.Second)))
		gone.Deleting = true
		p = testDecider.decide(worldOf(t, ta, gone), now.Add(2*time.Second))
		if len(p.Events) != 0 || len(p.Delete) != 0 || !equalStatus(ta.Status, p.Status) {
			t.Fatalf("a discarded pod being deleted changed something: %+v", p)
		}
	}
	t.Fatal("never reached the system-failure ceiling")
}

// TestEvictedAfterRunningReachesTheCeiling: a try seen running and then
// evicted, again and again (preempted spot nodes, in the normal order of watch
// events), reaches the system-failure ceiling: running does not start the
// count again, so the attempt does not relaunch forever.
func TestEvictedAfterRunningReachesTheCeiling(t *testing.T) {
	ta := newTA(0)
	for try := 1; try <= 10; try++ {
		now := t0.Add(time.Duration(try) * time.Hour)
		uid := fmt.Sprintf("pod-%d", try)
		w := worldOf(t, ta, ours(uid, now, plugin.Observation{Phase: plugin.PhaseQueued}))
		w.Launch = &launchOutcome{}
		ta = applied(ta, testDecider.decide(w, now))
		ta = applied(ta, testDecider.decide(worldOf(t, ta, ours(uid, now, running(now.Add(time.Second)))), now.Add(time.Second)))
		ta = applied(ta, testDecider.decide(worldOf(t, ta, ours(uid, now, evicted(now.Add(time.Minute)))), now.Add(time.Minute)))
		if ta.Status.IsTerminal() {
			if try != 4 || ta.Status.ErrorState.Code != CodeMaxSystemFailuresExceeded {
				t.Fatalf("ended after try %d with %+v, want MaxSystemFailuresExceeded after the 4th", try, ta.Status.ErrorState)
			}
			return
		}
		if ta.Status.SystemFailures != uint32(try) {
			t.Fatalf("after try %d (ran, then evicted) systemFailures = %d", try, ta.Status.SystemFailures)
		}
		gone := ours(uid, now, evicted(now.Add(time.Minute)))
		gone.Deleting = true
		ta = applied(ta, testDecider.decide(worldOf(t, ta, gone), now.Add(2*time.Minute)))
	}
	t.Fatal("ran and was evicted 10 times without reaching the system-failure ceiling")
}

// TestSystemFailuresResetPerAttempt is issue 10, item 7: attempt 2 does not
// inherit attempt 1's system failures.
func TestSystemFailuresResetPerAttempt(t *testing.T) {
	ta := runningTA(t, newTA(1))
	ta.Status.SystemFailures = 3
	p := testDecider.decide(worldOf(t, ta, ours("pod-1", t0, userFailure(t0.Add(time.Minute)))), t0.Add(time.Minute))
	if p.Status.Attempts != 2 || p.Status.SystemFailures != 0 {
		t.Errorf("attempts, systemFailures = %d, %d; want 2, 0", p.Status.Attempts, p.Status.SystemFailures)
	}
}

// TestSystemFailureCountedOnceAcrossACrash is issue 10, item 6 (systemFailure):
// the failed try's pod is marked discarded in the status before it is
// deleted; if the process dies in between, the next reconcile deletes it
// again and neither counts it twice nor adopts it.
func TestSystemFailureCountedOnceAcrossACrash(t *testing.T) {
	ta := runningTA(t, newTA(0))
	p := testDecider.decide(worldOf(t, ta, ours("pod-1", t0, evicted(t0.Add(time.Minute)))), t0.Add(time.Minute))
	ta = applied(ta, p) // status persisted; the delete never happened
	for i := 0; i < 3; i++ {
		p = testDecider.decide(worldOf(t, ta, ours("pod-1", t0, evicted(t0.Add(time.Minute)))), t0.Add(time.Duration(i+2)*time.Minute))
		if p.Status.SystemFailures != 1 || len(p.Events) != 0 || len(p.Delete) != 1 || p.Delete[0].UID != "pod-1" {
			t.Fatalf("reconcile %d after the crash: systemFailures %d, events %s, deletes %+v", i, p.Status.SystemFailures, evs(p.Events), p.Delete)
		}
	}
	// Once it is gone, the attempt relaunches.
	p = testDecider.decide(worldOf(t, ta, resource{}), t0.Add(time.Hour))
	if !p.Launch {
		t.Errorf("no relaunch once the discarded pod is gone: %+v", p)
	}
}
