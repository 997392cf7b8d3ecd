package controller

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/taskaction/executor/pkg/plugin"
)

// podChangeMatters says whether an update of an attempt's pod can change what
// a reconcile decides: its deletion, or a change of its status other than its
// first scheduling alone. The scheduler's binding of a pod never found
// unschedulable adds only PodScheduled=True, which no plugin reads as a new
// phase (a pod not yet started is queued whether or not it has a node; one
// found unschedulable, PodScheduled=False, and its later binding do wake);
// what the kubelet reports next (containers waiting, sandbox not ready,
// running) does. Skipping it spares one reconcile of every attempt.
func podChangeMatters(old, new *corev1.Pod) bool {
	if !old.DeletionTimestamp.Equal(new.DeletionTimestamp) {
		return true
	}
	if equality.Semantic.DeepEqual(old.Status, new.Status) {
		return false
	}
	if plugin.PodCondition(old, corev1.PodScheduled) != nil {
		return true // not its first scheduling (bound before, or found unschedulable)
	}
	if c := plugin.PodCondition(new, corev1.PodScheduled); c == nil || c.Status != corev1.ConditionTrue {
		return true
	}
	return !equality.Semantic.DeepEqual(withoutScheduled(old.Status), withoutScheduled(new.Status))
}

// withoutScheduled is s without its PodScheduled condition (s's own
// conditions are not changed: s comes from the cache).
func withoutScheduled(s corev1.PodStatus) corev1.PodStatus {
	s.Conditions = slices.DeleteFunc(slices.Clone(s.Conditions), func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodScheduled
	})
	if len(s.Conditions) == 0 {
		s.Conditions = nil
	}
	return s
}
