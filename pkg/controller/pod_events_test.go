package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Which updates of an attempt's pod wake a reconcile: every change of its
// status or deletion but the scheduler's binding alone.
func TestPodChangeMatters(t *testing.T) {
	scheduled := func(s corev1.ConditionStatus, reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodScheduled, Status: s, Reason: reason}
	}
	pending := corev1.PodStatus{Phase: corev1.PodPending}
	bound := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduled(corev1.ConditionTrue, "")}}
	waiting := *bound.DeepCopy()
	waiting.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	sandboxNotReady := *bound.DeepCopy()
	sandboxNotReady.Conditions = append(sandboxNotReady.Conditions, corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse})
	running := *bound.DeepCopy()
	running.Phase = corev1.PodRunning
	now := metav1.Now()

	for _, tc := range []struct {
		name     string
		old, new corev1.PodStatus
		deleting bool
		want     bool
	}{
		{"nothing changed", bound, bound, false, false},
		{"bound to a node", pending, bound, false, false},
		{"unschedulable", pending, corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduled(corev1.ConditionFalse, "Unschedulable")}}, false, true},
		{"unschedulable, then bound", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduled(corev1.ConditionFalse, "Unschedulable")}}, bound, false, true},
		{"bound with a waiting container", pending, waiting, false, true},
		{"containers waiting after the binding", bound, waiting, false, true},
		{"sandbox not ready", bound, sandboxNotReady, false, true},
		{"running", bound, running, false, true},
		{"deleted", bound, bound, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := &corev1.Pod{Status: *tc.old.DeepCopy()}
			new := &corev1.Pod{Status: *tc.new.DeepCopy()}
			if tc.deleting {
				new.DeletionTimestamp = &now
			}
			before := old.DeepCopy()
			if got := podChangeMatters(old, new); got != tc.want {
				t.Errorf("podChangeMatters = %v, want %v", got, tc.want)
			}
			if len(old.Status.Conditions) != len(before.Status.Conditions) {
				t.Error("podChangeMatters changed the cached pod's conditions")
			}
		})
	}
}
