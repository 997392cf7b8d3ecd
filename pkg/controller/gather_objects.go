package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// newObject is an empty object of the plugin's primary type.
func newObject(p plugin.Plugin) client.Object { return plugin.NewObject(p.WatchedTypes()[0]) }

// readResource reads the object under the attempt's name and classifies who
// controls it; the plugin reads its phase only from an object of ours.
func (r *Reconciler) readResource(ctx context.Context, p plugin.Plugin, tc plugin.TaskContext) (resource, error) {
	res := resource{Name: p.ResourceName(tc)}
	obj := newObject(p)
	key := types.NamespacedName{Namespace: tc.TaskAction.Namespace, Name: res.Name}
	// Not copied out of the cache: it is only read, here and by the plugin
	// (plugin.Plugin.Observe).
	if err := r.Client.Get(ctx, key, obj, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return res, nil
		}
		return res, fmt.Errorf("read %s: %w", key, err)
	}
	return r.describe(ctx, p, tc, obj)
}

func (r *Reconciler) describe(ctx context.Context, p plugin.Plugin, tc plugin.TaskContext, obj client.Object) (resource, error) {
	res := resource{Name: obj.GetName(), UID: obj.GetUID(), Created: obj.GetCreationTimestamp().Time, Deleting: obj.GetDeletionTimestamp() != nil}
	switch plugin.HolderOf(obj, tc.TaskAction) {
	case plugin.HeldByThis:
		res.Holder = holderUs
	case plugin.HeldByPrevious:
		res.Holder = holderPreviousTaskAction
	default:
		res.Holder = holderForeign
		return res, nil
	}
	if res.Holder == holderUs {
		obs, err := p.Observe(ctx, objectReader{obj: obj, pods: r.Client}, tc)
		if err != nil {
			return res, fmt.Errorf("observe %s: %w", res.Name, err)
		}
		res.Obs = obs
		if links, lc := obs.Logs, obs.LogContext; len(links) > 0 || lc != nil {
			res.Logs = func() attemptLogs { return attemptLogs{Links: links, Context: lc} }
		} else if pod, ok := obj.(*corev1.Pod); ok {
			// Rendered when an event needs them (most reconciles send none).
			res.Logs = sync.OnceValue(func() attemptLogs {
				logs, err := podLogs(r.TaskLogs, tc, pod)
				if err != nil {
					// A link that cannot be rendered is left out; the attempt goes on.
					log.FromContext(ctx).Info("could not render the attempt's log links", "pod", pod.Name, "error", err.Error())
				}
				return logs
			})
		}
	}
	return res, nil
}

// podCacheBehind says whether the cache has not yet seen a pod this process
// created under key: until the pod informer has synced past the create, it
// has not (no request is made), and the create's watch event wakes the
// reconcile. After that a missing pod is confirmed once with the API server
// (a pod deleted right after its create). arrived: the create's event reached
// the cache after the caller read it, so the caller reads again and asks once
// more with reread set (then the cache counts as synced past the create).
func (r *Reconciler) podCacheBehind(ctx context.Context, p plugin.Plugin, key types.NamespacedName, reread bool) (behind, arrived bool, err error) {
	rv, ok, arrived := r.memory.objectCreates.await(key)
	synced := r.synced(p)
	switch {
	case !ok:
		return false, false, nil
	case arrived && !reread:
		return false, true, nil
	case !arrived && synced != nil && !syncedPast(synced(), rv):
		return true, false, nil
	}
	if r.APIReader == nil {
		r.memory.objectCreates.forget(key)
		return false, false, nil
	}
	// Asked once: the record goes either way. A pod the API server has and
	// the synced cache lacks is waited for once more (the informer's store
	// may trail its sync point); if the cache still lacks it then, it never
	// will (its label changed) and the cache's word is taken.
	r.memory.objectCreates.forget(key)
	switch err := r.APIReader.Get(ctx, key, newObject(p)); {
	case err == nil:
		return true, false, nil
	case apierrors.IsNotFound(err):
		return false, false, nil
	default:
		r.memory.objectCreates.wrote(key, "", rv) // not answered: ask again next time
		return false, false, fmt.Errorf("read %s: %w", key, err)
	}
}

// earlierAttempts lists the objects of earlier attempts that this TaskAction
// controls and that are still there.
func (r *Reconciler) earlierAttempts(ctx context.Context, p plugin.Plugin, ta *flytev1.TaskAction, t *task.Task, attempt uint32, now time.Time) ([]resource, error) {
	names := map[string]bool{}
	for a := uint32(1); a < attempt; a++ {
		names[p.ResourceName(r.taskContext(ta, t, a, now))] = true
	}
	list, err := r.newList(p)
	if err != nil {
		return nil, err
	}
	if err := r.Client.List(ctx, list, client.InNamespace(ta.Namespace), client.MatchingFields{ownerIndex: string(ta.UID)}); err != nil {
		return nil, fmt.Errorf("list objects of %s: %w", ta.Name, err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var out []resource
	for _, it := range items {
		obj, ok := it.(client.Object)
		if !ok || !names[obj.GetName()] {
			continue
		}
		out = append(out, resource{Name: obj.GetName(), Holder: holderUs, UID: obj.GetUID(), Created: obj.GetCreationTimestamp().Time, Deleting: obj.GetDeletionTimestamp() != nil})
	}
	return out, nil
}

func (r *Reconciler) newList(p plugin.Plugin) (client.ObjectList, error) {
	s := r.Client.Scheme()
	gvk, err := apiutil.GVKForObject(p.WatchedTypes()[0], s)
	if err != nil {
		return nil, err
	}
	o, err := s.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, err
	}
	l, ok := o.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%s is not a list", gvk.Kind+"List")
	}
	return l, nil
}

// objectReader serves one already-read object, so that the plugin observes
// exactly the object the reconciler classified. It is not copied (a copy per
// reconcile was a large share of the executor's allocations): the plugin only
// reads it. An engine plugin may also read pods (its operator's pods carry the
// executor's label, so the pod cache holds them): those reads go to the
// informer cache, never to the API server; anything else is not served (a
// read of another kind would start an informer of every such object).
type objectReader struct {
	obj  client.Object
	pods client.Reader
}
