package controller

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/taskaction/executor/pkg/plugin"
)

// watches starts the watches of the plugins' object kinds. The default
// plugin's kinds (pods) are watched from the start; the others (an engine's
// custom resources, the sleep plugin's) once the first task needs them and
// the API server serves them, so that an engine that is not installed costs
// nothing and stops nothing, and one installed later needs no restart.
type watches struct {
	mu      sync.Mutex
	started map[schema.GroupVersionKind]*handledVersion
	// Set by SetupWithManager; nil in unit tests (every kind counts as watched).
	ctrl    controller.Controller
	cache   cache.Cache
	indexer client.FieldIndexer
	mapper  meta.RESTMapper
	scheme  *runtime.Scheme
	// handler maps an object event to its TaskAction; preds filter them.
	handler handler.EventHandler
	preds   func(client.Object) []predicate.Predicate
}

// notInstalledError says a task's kind is not served by the cluster.
type notInstalledError struct {
	gvk      schema.GroupVersionKind
	requires string
}

func (e *notInstalledError) Error() string {
	msg := fmt.Sprintf("the cluster does not serve %s of %s, which this task type runs as", e.gvk.Kind, e.gvk.GroupVersion())
	if e.requires != "" {
		msg += ": install " + e.requires
	}
	return msg
}

// ensure makes sure every kind of p is watched, starting the watches of those
// that are not yet. A kind the API server does not serve is a
// notInstalledError (the task cannot run); other errors are transient.
func (w *watches) ensure(ctx context.Context, p plugin.Plugin) error {
	if w == nil || w.ctrl == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, obj := range p.WatchedTypes() {
		gvk, err := apiutil.GVKForObject(obj, w.scheme)
		if err != nil {
			return err
		}
		if _, ok := w.started[gvk]; ok {
			continue
		}
		if _, err := w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if meta.IsNoMatchError(err) {
				ni := &notInstalledError{gvk: gvk}
				if r, ok := p.(plugin.Requirer); ok {
					ni.requires = r.Requires()
				}
				return ni
			}
			return fmt.Errorf("look up %s: %w", gvk, err)
		}
		if err := w.start(ctx, gvk, obj); err != nil {
			return err
		}
	}
	return nil
}

// start indexes a kind by controller, records the newest version its
// informer handed out, and watches it.
func (w *watches) start(ctx context.Context, gvk schema.GroupVersionKind, obj client.Object) error {
	if err := w.indexer.IndexField(ctx, obj, ownerIndex, controllerUID); err != nil {
		return fmt.Errorf("index %s by controller: %w", gvk.Kind, err)
	}
	seen := &handledVersion{}
	inf, err := w.cache.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("watch %s: %w", gvk.Kind, err)
	}
	if _, err := inf.AddEventHandler(seen.handler()); err != nil {
		return fmt.Errorf("watch %s: %w", gvk.Kind, err)
	}
	if err := w.ctrl.Watch(source.Kind(w.cache, obj, w.handler, w.preds(obj)...)); err != nil {
		return fmt.Errorf("watch %s: %w", gvk.Kind, err)
	}
	w.started[gvk] = seen
	return nil
}

// synced is the newest resourceVersion the informer of p's object kind has
// handed out (nil: unknown, as in unit tests).
func (w *watches) synced(p plugin.Plugin) func() string {
	if w == nil || w.ctrl == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	gvk, err := apiutil.GVKForObject(p.WatchedTypes()[0], w.scheme)
	if err != nil {
		return nil
	}
	if h := w.started[gvk]; h != nil {
		return h.get
	}
	return nil
}
