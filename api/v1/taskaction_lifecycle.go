package v1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The words of a TaskAction's life that the reconciler, the admission webhook
// and the garbage collector share. They live here, with the type, so that
// each of those packages depends on the API and none on another.

// Finalizer is the executor's finalizer on a TaskAction (Flyte's name): it
// stays from the first reconcile (or admission) until the TaskAction is
// deleted.
const Finalizer = "flyte.org/plugin-finalizer"

// Labels Flyte's executor writes on an ended TaskAction for its garbage
// collector. This executor writes none (its collector reads the status); the
// completed-time label is read as a fallback for TaskActions Flyte's executor
// ended.
const (
	TerminationStatusLabel   = "flyte.org/termination-status"
	TerminationStatusValue   = "terminated"
	CompletedTimeLabel       = "flyte.org/completed-time"
	CompletedTimeLabelFormat = "2006-01-02.15-04"
)

// IsTerminal says whether the status records the TaskAction's end: its
// Succeeded or Failed condition is true.
func (st *TaskActionStatus) IsTerminal() bool {
	return meta.IsStatusConditionTrue(st.Conditions, ConditionSucceeded) ||
		meta.IsStatusConditionTrue(st.Conditions, ConditionFailed)
}

// CompletedAt is when the executor recorded the TaskAction's end: the time of
// its Succeeded or Failed condition. ok is false while it runs (or when the
// condition carries no time).
func (st *TaskActionStatus) CompletedAt() (time.Time, bool) {
	for _, typ := range []string{ConditionSucceeded, ConditionFailed} {
		if c := meta.FindStatusCondition(st.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}
