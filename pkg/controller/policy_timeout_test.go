package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// TestTimeoutJudgesByWhenThePodEnded is issue 10, item 2: a pod that ended by
// its deadline is judged by how it ended, however late the reconcile sees it.
func TestTimeoutJudgesByWhenThePodEnded(t *testing.T) {
	created := t0.Add(time.Second)
	deadline := created.Add(time.Minute)
	late := deadline.Add(10 * time.Minute) // the executor was down, or the events service
	for _, tc := range []struct {
		name    string
		obs     plugin.Observation
		now     time.Time
		events  string
		code    string
		deletes string
		wake    time.Duration
	}{
		{"succeeded before the deadline, seen late", succeeded(deadline.Add(-time.Second)), late, "1:SUCCEEDED:v37", "", "", 0},
		{"succeeded at the deadline, seen late", succeeded(deadline), late, "1:SUCCEEDED:v37", "", "", 0},
		{"failed before the deadline, seen late: its own error", userFailure(deadline.Add(-time.Second)), late, "1:FAILED:v38", "Error", "", 0},
		{"succeeded after the deadline: timed out, pod kept (it ended)", succeeded(deadline.Add(time.Second)), late, "1:TIMED_OUT:v40", CodeTimeout, "", 0},
		{"still running at the deadline: timed out, pod stopped", running(created), deadline, "1:TIMED_OUT:v40", CodeTimeout, "pod-1", 0},
		{"running before the deadline: wake at it", running(created), deadline.Add(-15 * time.Second), "", "", "", 15 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := newTA(0)
			ta.Spec.Template.Timeout = ptrTo("1m")
			ta = runningTA(t, ta)
			p := testDecider.decide(worldOf(t, ta, ours("pod-1", created, tc.obs)), tc.now)
			if got := evs(p.Events); got != tc.events {
				t.Errorf("events = %q, want %q", got, tc.events)
			}
			code := ""
			if p.Status.ErrorState != nil {
				code = p.Status.ErrorState.Code
			}
			if code != tc.code {
				t.Errorf("errorState.code = %q, want %q", code, tc.code)
			}
			var dels string
			for _, d := range p.Delete {
				dels += string(d.UID)
			}
			if dels != tc.deletes {
				t.Errorf("deletes = %q, want %q", dels, tc.deletes)
			}
			if tc.wake > 0 && p.WakeAfter != tc.wake {
				t.Errorf("wake after %v, want %v", p.WakeAfter, tc.wake)
			}
			if tc.code == CodeTimeout {
				if c := p.Status.Conditions; !p.Status.IsTerminal() || findReason(c, flytev1.ConditionFailed) != flytev1.ReasonTimedOut {
					t.Errorf("conditions = %+v, want Failed TimedOut", c)
				}
			}
		})
	}
}

func findReason(cs []metav1.Condition, typ string) string {
	for _, c := range cs {
		if c.Type == typ {
			return c.Reason
		}
	}
	return ""
}

// TestQuotaWaitTimesOut is issue 31, item 11: an attempt whose launch keeps
// being refused for quota times out at the task's timeout counted from the
// first refusal (it used to count only once a pod existed, so the wait never
// ended); retried while attempts remain, else TimedOut.
func TestQuotaWaitTimesOut(t *testing.T) {
	quota := &launchOutcome{Err: &plugin.LaunchError{Retryable: true, Err: plugin.ExecError{Code: plugin.CodeQuotaExceeded, Message: "exceeded quota: q"}}}
	for _, retries := range []int32{0, 1} {
		ta := newTA(retries)
		ta.Spec.Template.Timeout = ptrTo("1m")
		w := worldOf(t, ta, resource{})
		w.Launch = quota
		ta = applied(ta, testDecider.decide(w, t0))
		for at := t0.Add(10 * time.Second); at.Before(t0.Add(time.Minute)); at = at.Add(15 * time.Second) {
			w = worldOf(t, ta, resource{})
			if p := testDecider.decide(w, at); !p.Launch {
				// Waiting out the backoff: wakes by the deadline at the latest.
				if p.WakeAfter <= 0 || at.Add(p.WakeAfter).After(t0.Add(time.Minute)) {
					t.Fatalf("retries %d, %v after the refusal: wake %v, past the deadline", retries, at.Sub(t0), p.WakeAfter)
				}
				ta = applied(ta, p)
				continue
			}
			w.Launch = quota
			p := testDecider.decide(w, at)
			if !p.Status.IsTerminal() && (p.WakeAfter <= 0 || at.Add(p.WakeAfter).After(t0.Add(time.Minute))) {
				// The refusal's backoff may be longer than the time left.
				t.Fatalf("retries %d, refused %v after the first: wake %v, past the deadline", retries, at.Sub(t0), p.WakeAfter)
			}
			ta = applied(ta, p)
		}
		p := testDecider.decide(worldOf(t, ta, resource{}), t0.Add(time.Minute))
		switch {
		case retries == 0 && (!p.Status.IsTerminal() || findReason(p.Status.Conditions, flytev1.ConditionFailed) != flytev1.ReasonTimedOut):
			t.Errorf("no retries left, a minute of quota refusals: conditions %+v; want TimedOut", p.Status.Conditions)
		case retries == 1 && (p.Status.Attempts != 2 || p.Status.ErrorState == nil || p.Status.ErrorState.Code != CodeTimeout):
			t.Errorf("a retry left, a minute of quota refusals: attempts %d, error %+v; want attempt 2 after a Timeout", p.Status.Attempts, p.Status.ErrorState)
		}
	}
}
