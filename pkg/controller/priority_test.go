package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestCompletionsFirst(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv}, Status: corev1.PodStatus{Phase: phase}}
	}
	// The wrapped handler enqueues the pod's own name, standing in for its owner.
	byName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
	})
	h := completionsFirst(byName)
	for _, tc := range []struct {
		name     string
		old, new *corev1.Pod
		want     int
	}{
		{"pod starts running", pod("a", corev1.PodPending, "1"), pod("a", corev1.PodRunning, "2"), 0},
		{"pod succeeds", pod("b", corev1.PodRunning, "1"), pod("b", corev1.PodSucceeded, "2"), CompletionPriority},
		{"pod fails", pod("c", corev1.PodRunning, "1"), pod("c", corev1.PodFailed, "2"), CompletionPriority},
		{"finished pod changes again", pod("d", corev1.PodSucceeded, "1"), pod("d", corev1.PodSucceeded, "2"), 0},
		{"resync of a running pod", pod("e", corev1.PodRunning, "1"), pod("e", corev1.PodRunning, "1"), handler.LowPriority},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}, q)
			item, prio, _ := q.GetWithPriority()
			if item.Name != tc.new.Name || prio != tc.want {
				t.Errorf("got %v at priority %d, want %s at %d", item, prio, tc.new.Name, tc.want)
			}
		})
	}
	t.Run("a deleted pod", func(t *testing.T) {
		q := priorityqueue.New[reconcile.Request]("test")
		defer q.ShutDown()
		h.Delete(context.Background(), event.DeleteEvent{Object: pod("f", corev1.PodRunning, "1")}, q)
		if _, prio, _ := q.GetWithPriority(); prio != CompletionPriority {
			t.Errorf("priority %d, want %d", prio, CompletionPriority)
		}
	})
	t.Run("a launch queued first is served after a completion", func(t *testing.T) {
		q := priorityqueue.New[reconcile.Request]("test")
		defer q.ShutDown()
		h.Create(context.Background(), event.CreateEvent{Object: pod("launch", corev1.PodPending, "1")}, q)
		h.Update(context.Background(), event.UpdateEvent{ObjectOld: pod("done", corev1.PodRunning, "1"), ObjectNew: pod("done", corev1.PodSucceeded, "2")}, q)
		if item, _, _ := q.GetWithPriority(); item.Name != "done" {
			t.Errorf("first served %s, want the completion", item.Name)
		}
	})
}
