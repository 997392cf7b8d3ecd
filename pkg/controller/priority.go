package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskaction/executor/pkg/plugin"
)

// CompletionPriority is the queue priority of a TaskAction whose pod has just
// finished. Under saturation the queue is full of launches; a finished pod is
// the cheaper and more valuable work (one status write ends a TaskAction and
// frees its node), so it goes first instead of waiting behind every launch.
const CompletionPriority = 10

// completionsFirst wraps the pod → owner handler: an update that takes a pod
// to Succeeded or Failed, or its deletion, enqueues the owner at
// CompletionPriority; every other event keeps the handler's own priority.
func completionsFirst(h handler.EventHandler) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, e, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if finished(e.ObjectNew) && !finished(e.ObjectOld) {
				q = withPriority(q, CompletionPriority)
			}
			h.Update(ctx, e, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, e, withPriority(q, CompletionPriority))
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Generic(ctx, e, q)
		},
	}
}

func finished(obj client.Object) bool {
	pod, ok := obj.(*corev1.Pod)
	return ok && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed)
}

// withPriority makes every add to q carry priority p; q is returned as it is
// when it is not a priority queue.
func withPriority(q workqueue.TypedRateLimitingInterface[reconcile.Request], p int) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok {
		return q
	}
	return prioritized{PriorityQueue: pq, priority: p}
}

type prioritized struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	priority int
}

func (q prioritized) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

// AddWithOpts gives an add that names no priority q's: some of
// controller-runtime's handlers (EnqueueRequestForObject's) add a changed
// object through it rather than through Add.
func (q prioritized) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = &q.priority
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}

// controllingTaskAction maps an object to the TaskAction that controls it, by
// its controller reference alone: the kind is ours and namespaced, so no REST
// mapping is needed (controller-runtime's owner handler does one per event,
// which a profile at N=10,000 showed among the executor's largest allocators).
func controllingTaskAction(_ context.Context, obj client.Object) []reconcile.Request {
	o := metav1.GetControllerOfNoCopy(obj)
	if o == nil || !plugin.IsTaskActionRef(o) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: o.Name}}}
}
