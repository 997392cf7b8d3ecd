package controller

import (
	"context"
	"reflect"
	"testing"

	flytev1 "github.com/taskaction/executor/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestCompletionsFirst(t *testing.T) {
	// Each pod is controlled by the TaskAction of its own name, so the queue's
	// item says which event it came from.
	pod := func(name string, phase corev1.PodPhase, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv,
			OwnerReferences: []metav1.OwnerReference{taskActionRef(name, true)}}, Status: corev1.PodStatus{Phase: phase}}
	}
	// The handler the reconciler registers for its pods.
	h := completionsFirst(handler.EnqueueRequestsFromMapFunc(controllingTaskAction))
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

func taskActionRef(name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: flytev1.GroupVersion.String(), Kind: "TaskAction", Name: name, UID: types.UID(name + "-uid"), Controller: &controller}
}

func TestControllingTaskAction(t *testing.T) {
	other := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "j-uid", Controller: ptr.To(true)}
	for _, tc := range []struct {
		name string
		refs []metav1.OwnerReference
		want []reconcile.Request
	}{
		{"controlled by a TaskAction", []metav1.OwnerReference{taskActionRef("ta", true)}, []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "ta"}}}},
		{"a TaskAction owns it, not as controller", []metav1.OwnerReference{taskActionRef("ta", false)}, nil},
		{"controlled by another kind", []metav1.OwnerReference{taskActionRef("ta", false), other}, nil},
		{"no owner", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", OwnerReferences: tc.refs}}
			if got := controllingTaskAction(context.Background(), pod); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Some of controller-runtime's handlers add through AddWithOpts, naming no
// priority; a completion keeps its priority that way too.
func TestPrioritizedAddWithOpts(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	withPriority(q, CompletionPriority).(priorityqueue.PriorityQueue[reconcile.Request]).AddWithOpts(priorityqueue.AddOpts{}, reconcile.Request{})
	if _, prio, _ := q.GetWithPriority(); prio != CompletionPriority {
		t.Errorf("priority %d, want %d", prio, CompletionPriority)
	}
	withPriority(q, CompletionPriority).(priorityqueue.PriorityQueue[reconcile.Request]).AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, reconcile.Request{NamespacedName: types.NamespacedName{Name: "low"}})
	if _, prio, _ := q.GetWithPriority(); prio != handler.LowPriority {
		t.Errorf("priority %d, want the one asked for, %d", prio, handler.LowPriority)
	}
}
