package controller

import (
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// staleWindow bounds how long a reconcile waits for the cache to show our own
// last write; past it the cache is trusted again.
const staleWindow = 5 * time.Second

// writeTracker remembers the resourceVersion of the executor's last write to
// each TaskAction, so that (a) the watch event of that write does not trigger a
// wasted reconcile and (b) a reconcile never acts on a cache older than it.
type writeTracker struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	last  map[types.NamespacedName]written
}

// written are the resourceVersions of our recent writes to one object, oldest first.
type written struct {
	rvs []string
	at  time.Time
}

func newWriteTracker(c clock.PassiveClock) *writeTracker {
	return &writeTracker{clock: c, last: map[types.NamespacedName]written{}}
}

func (w *writeTracker) wrote(key types.NamespacedName, rv string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.last[key]
	if len(e.rvs) >= 4 {
		e.rvs = e.rvs[1:]
	}
	w.last[key] = written{rvs: append(e.rvs, rv), at: w.clock.Now()}
}

// ours reports whether rv is one of our own recent writes; the cache has then
// caught up with it and with every write before it.
func (w *writeTracker) ours(key types.NamespacedName, rv string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.last[key]
	if !ok {
		return false
	}
	for i, v := range e.rvs {
		if v == rv {
			if e.rvs = e.rvs[i+1:]; len(e.rvs) == 0 {
				delete(w.last, key)
			} else {
				w.last[key] = e
			}
			return true
		}
	}
	return false
}

// stale reports whether the cached object at rv predates our own last write.
func (w *writeTracker) stale(key types.NamespacedName, rv string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.last[key]
	if !ok {
		return false
	}
	if e.rvs[len(e.rvs)-1] == rv || w.clock.Since(e.at) > staleWindow {
		delete(w.last, key)
		return false
	}
	return true
}

func (w *writeTracker) forget(key types.NamespacedName) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
}

// taskActionChanges passes TaskAction events except resyncs and the echoes of
// the executor's own writes.
func (r *Reconciler) taskActionChanges() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion() {
				return false
			}
			return !r.writes.ours(client.ObjectKeyFromObject(e.ObjectNew), e.ObjectNew.GetResourceVersion())
		},
	}
}

// podChanges passes pod events that can change an attempt's phase: status,
// deletion. The executor's own creates carry nothing new and are dropped.
func podChanges() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Pod)
			n, ok2 := e.ObjectNew.(*corev1.Pod)
			if !ok1 || !ok2 {
				return true
			}
			return !reflect.DeepEqual(o.Status, n.Status) || !o.DeletionTimestamp.Equal(n.DeletionTimestamp)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// SetupWithManager registers the reconciler: it watches TaskActions and the
// objects its plugins create for them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.writes = newWriteTracker(r.Clock)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("taskaction").
		For(&flytev1.TaskAction{}, builder.WithPredicates(r.taskActionChanges())).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: workers,
			// Per-object backoff only, capped at 30s: after an outage of the events
			// service every TaskAction retries within half a minute, instead of
			// queueing behind a cluster-wide 10/s bucket and a 16-minute ceiling.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](50*time.Millisecond, 30*time.Second),
		})
	seen := map[reflect.Type]bool{}
	for _, p := range r.Registry.Plugins() {
		for _, obj := range p.WatchedTypes() {
			if t := reflect.TypeOf(obj); !seen[t] {
				seen[t] = true
				b = b.Owns(obj, builder.WithPredicates(podChanges()))
			}
		}
	}
	return b.Complete(r)
}
