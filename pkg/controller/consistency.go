package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// writeOrder remembers the resourceVersion of this process's last write to
// each object, so that a reconcile never decides from a cached copy older than
// that write (read-your-writes over the informer cache). Versions are ordered
// with apimachinery's comparison; a copy at or past the write clears the entry.
// Nothing expires by time: the informer always catches up, and its watch event
// is what wakes the waiting reconcile.
type writeOrder struct {
	mu   sync.Mutex
	last map[types.NamespacedName]string
}

func newWriteOrder() *writeOrder { return &writeOrder{last: map[types.NamespacedName]string{}} }

func (o *writeOrder) wrote(key types.NamespacedName, rv string) {
	if o == nil || rv == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.last[key]; ok {
		if c, err := resourceversion.CompareResourceVersion(rv, old); err == nil && c < 0 {
			return
		}
	}
	o.last[key] = rv
}

// behind says whether a cached copy at rv is older than our last write.
func (o *writeOrder) behind(key types.NamespacedName, rv string) bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	last, ok := o.last[key]
	if !ok {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(rv, last)
	if err != nil || c >= 0 {
		// Caught up (or versions this storage does not order): trust the cache.
		delete(o.last, key)
		return false
	}
	return true
}

func (o *writeOrder) forget(key types.NamespacedName) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.last, key)
}

// version returns the remembered write, if any.
func (o *writeOrder) version(key types.NamespacedName) (string, bool) {
	if o == nil {
		return "", false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	rv, ok := o.last[key]
	return rv, ok
}

// syncedPast says whether an informer whose last synced resourceVersion is
// synced has seen everything up to rv.
func syncedPast(synced, rv string) bool {
	c, err := resourceversion.CompareResourceVersion(synced, rv)
	return err == nil && c >= 0
}

// released remembers the TaskActions this process let go (finalizer removed
// while deleting): the API server deletes them at once, but the write that
// deleted one does not always carry a newer resourceVersion, so the cache's
// last copy of it is recognised by UID until the deletion reaches the cache.
type released struct {
	mu   sync.Mutex
	uids map[types.NamespacedName]types.UID
}

func newReleased() *released { return &released{uids: map[types.NamespacedName]types.UID{}} }

func (g *released) add(key types.NamespacedName, uid types.UID) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.uids[key] = uid
}

// has says whether the object at key with uid was let go; a new object of the
// same name clears the entry.
func (g *released) has(key types.NamespacedName, uid types.UID) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old, ok := g.uids[key]
	if ok && old != uid {
		delete(g.uids, key)
		return false
	}
	return ok
}

func (g *released) forget(key types.NamespacedName) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.uids, key)
}
