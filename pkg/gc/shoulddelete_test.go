package gc

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
)

func TestShouldDelete(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 30, 40, 0, time.UTC)
	ttl := time.Hour
	succeeded := []metav1.Condition{{Type: flytev1.ConditionSucceeded, Status: metav1.ConditionTrue, Reason: flytev1.ReasonCompleted}}
	failed := []metav1.Condition{{Type: flytev1.ConditionFailed, Status: metav1.ConditionTrue, Reason: flytev1.ReasonPermanentFailure}}
	running := []metav1.Condition{
		{Type: flytev1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: flytev1.ReasonExecuting},
		{Type: flytev1.ConditionSucceeded, Status: metav1.ConditionFalse, Reason: flytev1.ReasonExecuting},
	}
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	label := func(d time.Duration) map[string]string {
		return map[string]string{
			flytev1.TerminationStatusLabel: flytev1.TerminationStatusValue,
			flytev1.CompletedTimeLabel:     now.Add(d).Format(flytev1.CompletedTimeLabelFormat),
		}
	}
	deleting := metav1.NewTime(now)

	for _, tc := range []struct {
		name        string
		conds       []metav1.Condition
		completedAt *metav1.Time
		labels      map[string]string
		deletionTS  *metav1.Time
		history     *metav1.Time // when the last phase happened (a pod's finish)
		want        bool
		why         string
	}{
		{name: "succeeded, completedAt past the TTL", conds: succeeded, completedAt: at(-ttl - time.Second), want: true, why: reasonExpired},
		{name: "failed, completedAt past the TTL", conds: failed, completedAt: at(-2 * ttl), want: true, why: reasonExpired},
		{name: "end recorded exactly TTL ago", conds: succeeded, completedAt: at(-ttl), want: true, why: reasonExpired},
		{name: "end recorded one second short of the TTL", conds: succeeded, completedAt: at(-ttl + time.Second), why: reasonFresh},
		{name: "end recorded in the future (clock skew)", conds: succeeded, completedAt: at(time.Minute), why: reasonFresh},
		{name: "end recorded wins over an old label", conds: succeeded, completedAt: at(-time.Minute), labels: label(-10 * ttl), why: reasonFresh},
		{name: "end recorded wins over a fresh label", conds: succeeded, completedAt: at(-2 * ttl), labels: label(0), want: true, why: reasonExpired},
		// The end is counted from when the executor recorded it, not from when
		// the pod finished: after an outage longer than the TTL a fresh result stays.
		{name: "pod ended long ago, end recorded just now", conds: succeeded, completedAt: at(-time.Second), history: at(-3 * ttl), why: reasonFresh},
		{name: "label fallback, past TTL plus its minute", conds: succeeded, labels: label(-ttl - time.Minute), want: true, why: reasonExpired},
		// 12:30:40 - 1h is labelled 11:30; the TaskAction may have ended at
		// 11:30:59, so it is kept until 12:31:00.
		{name: "label fallback, same minute as TTL ago: kept", conds: succeeded, labels: label(-ttl), why: reasonFresh},
		{name: "label fallback, fresh", conds: failed, labels: label(-time.Minute), why: reasonFresh},
		{name: "unparsable label", conds: succeeded, labels: map[string]string{flytev1.CompletedTimeLabel: "yesterday"}, why: reasonUnknownAge},
		{name: "label in RFC 3339", conds: succeeded, labels: map[string]string{flytev1.CompletedTimeLabel: "2026-12-01T10-00"}, why: reasonUnknownAge},
		{name: "terminal without a recorded end or label", conds: succeeded, why: reasonUnknownAge},
		{name: "running with an old terminated label", conds: running, labels: label(-10 * ttl), why: reasonNotTerminal},
		{name: "no status at all, old label", labels: label(-10 * ttl), why: reasonNotTerminal},
		{name: "Succeeded=False is not terminal", conds: running[1:], labels: label(-10 * ttl), why: reasonNotTerminal},
		{name: "already deleting", conds: succeeded, completedAt: at(-2 * ttl), deletionTS: &deleting, why: reasonDeleting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := &flytev1.TaskAction{
				ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: tc.labels, DeletionTimestamp: tc.deletionTS},
				Status:     flytev1.TaskActionStatus{Conditions: append([]metav1.Condition(nil), tc.conds...)},
			}
			for i := range ta.Status.Conditions {
				if c := &ta.Status.Conditions[i]; c.Status == metav1.ConditionTrue && c.Type != flytev1.ConditionProgressing && tc.completedAt != nil {
					c.LastTransitionTime = *tc.completedAt
				}
			}
			if tc.history != nil {
				ta.Status.PhaseHistory = []flytev1.PhaseTransition{{Phase: flytev1.ReasonCompleted, OccurredAt: *tc.history}}
			}
			got, why := shouldDelete(ta, now, ttl)
			if got != tc.want || why != tc.why {
				t.Errorf("shouldDelete = %v (%s), want %v (%s)", got, why, tc.want, tc.why)
			}
		})
	}
}
