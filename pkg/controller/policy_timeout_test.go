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
				if c := p.Status.Conditions; !isTerminalStatus(&p.Status) || findReason(c, flytev1.ConditionFailed) != flytev1.ReasonTimedOut {
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
