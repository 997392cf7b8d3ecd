package controller

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"
)

// readYourWrites remembers the resourceVersion of this process's last write to
// each object, so that a reconcile never decides from a cached copy older than
// that write (read-your-writes over the informer cache). Versions are ordered
// with apimachinery's comparison; a copy at or past the write clears the entry.
// Nothing expires by time: the informer always catches up, and its watch event
// is what wakes a waiting reconcile.
//
// It also recognises the watch event of the write itself (echo): the
// reconcile that wrote has already planned what follows, so that event wakes
// nobody unless a reconcile found the cache behind and waits for it. The
// event may come before the write's response: while a write is under way, the
// first event from the version it writes over is taken for it, and if the
// response then names another version, that event was someone else's and the
// writing reconcile runs again (missed).
type readYourWrites struct {
	mu      sync.Mutex
	last    map[types.NamespacedName]*ownWrite
	writing map[types.NamespacedName]*pendingWrite
	missed  map[types.NamespacedName]bool
}

// ownWrite is our last write to one object.
type ownWrite struct {
	base, rv string // the resourceVersion written over ("" for a create) and the one written
	awaited  bool   // a reconcile found the cache behind it and waits for its event
	arrived  bool   // its event reached the cache (and was not passed on)
}

// pendingWrite is a write under way: the version it writes over, and the
// version of the event taken for it before its response.
type pendingWrite struct{ base, taken string }

func newReadYourWrites() *readYourWrites {
	return &readYourWrites{last: map[types.NamespacedName]*ownWrite{},
		writing: map[types.NamespacedName]*pendingWrite{}, missed: map[types.NamespacedName]bool{}}
}

// write runs do, a write of key over the version base that returns the
// version written, and records it.
func (o *readYourWrites) write(key types.NamespacedName, base string, do func() (string, error)) error {
	if o == nil {
		_, err := do()
		return err
	}
	o.mu.Lock()
	o.writing[key] = &pendingWrite{base: base}
	o.mu.Unlock()
	rv, err := do()
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.writing[key]
	delete(o.writing, key)
	if p != nil && p.taken != "" && (err != nil || p.taken != rv) && base != "" {
		// The event taken for this update was another's. (A create whose
		// taken event was another's failed: its caller handles that.)
		o.missed[key] = true
	}
	if err != nil {
		return err
	}
	if p != nil && p.taken == rv {
		// The cache had the write before its response: every later read
		// sees it, and its event has come; nothing is left to remember.
		delete(o.last, key)
		return nil
	}
	o.record(key, base, rv)
	return nil
}

// wrote records a write that turned base into rv.
func (o *readYourWrites) wrote(key types.NamespacedName, base, rv string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.record(key, base, rv)
}

func (o *readYourWrites) record(key types.NamespacedName, base, rv string) {
	if rv == "" {
		return
	}
	if old, ok := o.last[key]; ok {
		if c, err := resourceversion.CompareResourceVersion(rv, old.rv); old.rv == rv || (err == nil && c < 0) {
			return // the same write again, or an older one's late response
		}
	}
	o.last[key] = &ownWrite{base: base, rv: rv}
}

// takeMissed says whether an event was taken for a write of key that turned
// out to be another's (the reconcile must look again), and clears it.
func (o *readYourWrites) takeMissed(key types.NamespacedName) bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.missed[key]
	delete(o.missed, key)
	return m
}

// behind says whether a cached copy at rv is older than our last write, and
// if so whether that write has reached the cache since the copy was read
// (then reading again finds it). A reconcile told it is behind, and not that
// it arrived, is woken by the write's event.
func (o *readYourWrites) behind(key types.NamespacedName, rv string) (behind, arrived bool) {
	if o == nil {
		return false, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.last[key]
	if !ok {
		return false, false
	}
	c, err := resourceversion.CompareResourceVersion(rv, w.rv)
	if err != nil || c >= 0 {
		// Caught up (or versions this storage does not order): trust the cache.
		delete(o.last, key)
		return false, false
	}
	if !w.arrived {
		w.awaited = true
	}
	return true, w.arrived
}

// echo says whether a watch event that turned oldRV into newRV is exactly our
// last write to key (a create when oldRV is ""), awaited by no reconcile: it
// need wake none. Any other change, or a watch that skipped versions, is not
// an echo.
func (o *readYourWrites) echo(key types.NamespacedName, oldRV, newRV string) bool {
	if o == nil || oldRV == newRV {
		return false // a resync is never a write's event
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.writing[key]; p != nil && p.taken == "" && p.base == oldRV {
		p.taken = newRV
		return true
	}
	w, ok := o.last[key]
	if !ok || w.rv != newRV || w.base != oldRV || w.awaited {
		return false
	}
	w.arrived = true
	return true
}

func (o *readYourWrites) forget(key types.NamespacedName) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.last, key)
	delete(o.writing, key)
	delete(o.missed, key)
}

// await returns the remembered write to key, if any, and whether its event
// has reached the cache; if it has not, the caller waits for that event,
// which then wakes a reconcile.
func (o *readYourWrites) await(key types.NamespacedName) (rv string, ok, arrived bool) {
	if o == nil {
		return "", false, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.last[key]
	if !ok {
		return "", false, false
	}
	if !w.arrived {
		w.awaited = true
	}
	return w.rv, true, w.arrived
}

// syncedPast says whether an informer whose last synced resourceVersion is
// synced has seen everything up to rv.
// handledVersion is the highest resourceVersion of the objects an informer
// has handed to its handlers: a handler runs after the informer's store took
// the change, so the store has seen at least that far.
type handledVersion struct {
	mu sync.Mutex
	rv string
}

func (h *handledVersion) observe(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok || o.GetResourceVersion() == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, err := resourceversion.CompareResourceVersion(o.GetResourceVersion(), h.rv); h.rv == "" || (err == nil && c > 0) {
		h.rv = o.GetResourceVersion()
	}
}

func (h *handledVersion) get() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rv
}

func (h *handledVersion) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    h.observe,
		UpdateFunc: func(_, obj any) { h.observe(obj) },
		DeleteFunc: h.observe,
	}
}

func syncedPast(synced, rv string) bool {
	c, err := resourceversion.CompareResourceVersion(synced, rv)
	return err == nil && c >= 0
}
