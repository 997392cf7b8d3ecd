package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"google.golang.org/protobuf/proto"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/storage"
	"github.com/taskaction/executor/pkg/task"
)

// Field indexes of the informer cache.
const (
	// ownerIndex indexes plugin objects by the UID of their TaskAction controller.
	ownerIndex = "flyte.org/controller-uid"
	// identityIndex indexes TaskActions by the identity their events carry.
	identityIndex = "flyte.org/action-identity"
)

// controllerUID is the UID of obj's TaskAction controller, if any.
func controllerUID(obj client.Object) []string {
	if o := metav1.GetControllerOfNoCopy(obj); o != nil && plugin.IsTaskActionRef(o) {
		return []string{string(o.UID)}
	}
	return nil
}

// actionIdentity is what the events service tells actions apart by.
func actionIdentity(obj client.Object) []string {
	ta, ok := obj.(*flytev1.TaskAction)
	if !ok || !identified(ta) {
		return nil
	}
	s := ta.Spec
	return []string{s.Project + "/" + s.Domain + "/" + s.RunName + "/" + s.ActionName}
}

// gather reads everything the decision needs: the decoded task, the current
// attempt's pod (from the label-scoped cache, its controller checked by UID),
// the pods of earlier attempts, and the cache's answer before a launch.
func (r *Reconciler) gather(ctx context.Context, ta *flytev1.TaskAction, now time.Time) (World, plugin.Plugin, error) {
	w := World{TA: ta}
	if ta.Spec.ActionType == flytev1.ActionTypeCondition {
		w.ConditionTimeout, w.SpecErr = conditionTimeout(conditionSpec(ta))
		if err := readError(ta); err != nil {
			w.SpecErr = err
		}
		return w, nil, nil
	}
	t, err := task.FromTaskAction(ta)
	if err != nil {
		t = nil
	}
	w.Task, w.SpecErr = t, specError(ta, t, err)
	typ := ta.Spec.TaskType
	if t != nil && t.Type != "" {
		typ = t.Type
	}
	p, err := r.Registry.Resolve(typ)
	if err == nil {
		err = r.watches.ensure(ctx, p)
	}
	var notServed *notInstalledError
	if err != nil && (errors.As(err, &notServed) || p == nil) {
		w.PluginErr = err
		return w, nil, nil
	}
	if err != nil {
		return w, p, err
	}
	if w.SpecErr == nil {
		w.SpecErr = r.storageAllowed(ta, t, p)
	}
	attempt := max(ta.Status.Attempts, 1)
	tc := r.taskContext(ta, t, attempt, now)
	if w.Pod, err = r.readResource(ctx, p, tc); err != nil {
		return w, p, err
	}
	key := types.NamespacedName{Namespace: ta.Namespace, Name: w.Pod.Name}
	if w.Pod.Holder == holderNone {
		var arrived bool
		if w.PodCacheBehind, arrived, err = r.podCacheBehind(ctx, p, key, false); err == nil && arrived {
			// The event of our create reached the cache after the read above.
			if w.Pod, err = r.readResource(ctx, p, tc); err == nil && w.Pod.Holder == holderNone {
				w.PodCacheBehind, _, err = r.podCacheBehind(ctx, p, key, true)
			}
		}
		if err != nil {
			return w, p, err
		}
	}
	if w.Pod.Holder != holderNone {
		r.podCreates.forget(key)
	}
	if readState(&ta.Status, attempt).Pod == "" {
		w.Unrecorded = r.launches.get(client.ObjectKeyFromObject(ta), ta.UID, attempt)
	}
	w.Saturated = r.saturated()
	if controllerutil.ContainsFinalizer(ta, flytev1.Finalizer) && attempt > 1 {
		if w.Others, err = r.earlierAttempts(ctx, p, ta, t, attempt, now); err != nil {
			return w, p, err
		}
	}
	if ta.Status.IsTerminal() || !ta.DeletionTimestamp.IsZero() || w.SpecErr != nil {
		return w, p, nil
	}
	if w.RuntimeError, err = r.readRuntimeError(ctx, ta, t, w.Pod, attempt); err != nil {
		return w, p, err
	}
	started := hasStarted(ta) || w.Pod.Holder == holderUs || w.Unrecorded != nil
	if w.Duplicate, err = r.duplicateOf(ctx, p, ta, started); err != nil {
		return w, p, err
	}
	s := readState(&ta.Status, attempt)
	waiting := s.RetryAt != nil && now.Before(s.RetryAt.Time)
	ask := shouldAskCache(w) && w.Pod.Holder == holderNone && s.Pod == "" && !waiting && !w.PodCacheBehind
	if keyedByInputs(t) && (ask || needsKeyAfterLaunch(w)) {
		w.InputsKey = r.inputsKey(ctx, ta, t)
	}
	if ask && (w.InputsKey == nil || w.InputsKey.StorageErr == nil) {
		w.Cache = r.askCache(ctx, w)
	}
	return w, p, nil
}

// locationChecker is a blob store that says, without I/O, whether it may
// reach a location (storage.Store: its configured buckets only).
type locationChecker interface {
	Check(uri string) error
}

// storageAllowed refuses a task whose data the executor would read (a
// Flyte-form task: its error.pb and its cache key's inputs; the inputs a
// launch reads, readsInputs) at a location its storage configuration does not
// allow: whoever writes a TaskAction must not have the executor read, with
// its own credentials, what they could not (and copy it into a pod spec).
func (r *Reconciler) storageAllowed(ta *flytev1.TaskAction, t *task.Task, p plugin.Plugin) error {
	c, ok := r.Storage.(locationChecker)
	if !ok || t == nil || (t.Form != task.FormFlyte && !readsInputs(p, t)) {
		return nil
	}
	for _, f := range []struct{ field, uri string }{
		{"spec.inputUri", ta.Spec.InputURI}, {"spec.runOutputBase", task.OutputPrefix(ta, 1)},
	} {
		if f.uri == "" {
			continue
		}
		if err := c.Check(f.uri); err != nil {
			return &task.FieldError{Field: f.field, Reason: err.Error()}
		}
	}
	return nil
}

// readsInputs says whether the launch of t reads its inputs: its command
// renders one ({{.Inputs.x}}), or its plugin uses them (the sleep plugin's
// duration).
func readsInputs(p plugin.Plugin, t *task.Task) bool {
	if t.ReferencesInputs() {
		return true
	}
	u, ok := p.(plugin.InputsUser)
	return ok && u.UsesInputs(t)
}

// needsKeyAfterLaunch says whether the cache key is used once the pod runs:
// to store the outputs of a succeeded attempt, or to hold a reservation.
func needsKeyAfterLaunch(w World) bool {
	if w.TA.Status.CacheStatus != flytev1.CacheMiss || w.Pod.Holder != holderUs {
		return false
	}
	return w.Pod.Obs.Phase == plugin.PhaseSucceeded || w.Task.Cache.Serializable
}

// storageTimeout bounds one read of blob storage: an outage is a system
// failure with backoff, never a hang.
const storageTimeout = 30 * time.Second

// inputsKey computes Flyte's cache key of a discoverable Flyte-form task,
// reading its inputs at spec.inputUri.
func (r *Reconciler) inputsKey(ctx context.Context, ta *flytev1.TaskAction, t *task.Task) *inputsKey {
	tmpl := &core.TaskTemplate{}
	if err := proto.Unmarshal(t.Raw, tmpl); err != nil {
		return &inputsKey{Err: fmt.Errorf("decode the task template: %w", err)}
	}
	if r.Storage == nil {
		return &inputsKey{Err: errors.New("no blob storage is configured to read the inputs the cache key covers")}
	}
	ctx, cancel := context.WithTimeout(ctx, storageTimeout)
	defer cancel()
	in := &recordingReader{r: r.Storage}
	// The cache version is spec.cacheKey as it is, empty included (Flyte's
	// executor does not fall back on metadata.discovery_version): the same
	// key as Flyte's for the same TaskAction.
	key, _, err := cache.TaskKey(ctx, in, tmpl, ta.Spec.InputURI, ta.Spec.CacheKey)
	switch {
	case in.err != nil:
		return &inputsKey{StorageErr: in.err}
	case err != nil:
		return &inputsKey{Err: err}
	}
	return &inputsKey{Key: key, Inputs: in.inputs}
}

// readRuntimeError reads the error.pb of the current attempt once its pod
// finished: Flyte's runtime writes it (Flyte-form tasks) to report a failure,
// even when its container exits 0.
func (r *Reconciler) readRuntimeError(ctx context.Context, ta *flytev1.TaskAction, t *task.Task, pod resource, attempt uint32) (*runtimeError, error) {
	if r.Storage == nil || t.Form != task.FormFlyte || pod.Holder != holderUs || !pod.Obs.Finished ||
		pod.UID == readState(&ta.Status, attempt).Discarded {
		return nil, nil
	}
	prefix := task.OutputPrefix(ta, int32(attempt))
	if prefix == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, storageTimeout)
	defer cancel()
	doc, err := r.Storage.ReadTaskError(ctx, prefix)
	if err != nil {
		return &runtimeError{StorageErr: fmt.Errorf("read %s/%s: %w", prefix, storage.ErrorFile, err)}, nil
	}
	e := &runtimeError{Doc: doc}
	if !e.found() && pod.Obs.Phase == plugin.PhaseSucceeded && declaresOutputs(t) {
		// A success must leave the outputs its interface declares: the parent
		// reads them at this URI.
		ok, err := r.Storage.OutputsExist(ctx, prefix)
		if err != nil {
			return &runtimeError{StorageErr: fmt.Errorf("check %s/%s: %w", prefix, storage.OutputsFile, err)}, nil
		}
		e.OutputsMissing = !ok
		e.OutputURI = task.OutputURI(ta, int32(attempt))
	}
	return e, nil
}

// declaresOutputs says whether the task's interface names any output.
func declaresOutputs(t *task.Task) bool {
	if len(t.Interface) == 0 {
		return false
	}
	var iface core.TypedInterface
	if err := proto.Unmarshal(t.Interface, &iface); err != nil {
		return false // the decoder accepted it; an interface we cannot read asks for nothing
	}
	return len(iface.GetOutputs().GetVariables()) > 0
}

// recordingReader keeps the error of the inputs read, which tells a storage
// failure from a key that cannot be computed.
type recordingReader struct {
	r      cache.InputsReader
	err    error
	inputs *core.LiteralMap
}

func (r *recordingReader) ReadInputs(ctx context.Context, uri string) (*core.LiteralMap, error) {
	m, err := r.r.ReadInputs(ctx, uri)
	if err != nil {
		r.err = fmt.Errorf("read the inputs at %s: %w", uri, err)
	}
	r.inputs = m
	return m, err
}

// conditionSpec is spec.conditionSpec, Flyte's serialized ConditionAction.
func conditionSpec(ta *flytev1.TaskAction) []byte { return ta.Spec.ConditionSpec }

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
	o := metav1.GetControllerOfNoCopy(obj)
	switch {
	case o != nil && plugin.IsTaskActionRef(o) && o.UID == tc.TaskAction.UID:
		res.Holder = holderUs
	case o != nil && plugin.IsTaskActionRef(o) && o.Name == tc.TaskAction.Name:
		res.Holder = holderEarlier
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
			ta, t, attempt := tc.TaskAction, tc.Task, uint32(max(tc.Attempt, 1))
			res.Logs = sync.OnceValue(func() attemptLogs {
				logs, err := podLogs(r.TaskLogs, ta, t, attempt, pod)
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
	rv, ok, arrived := r.podCreates.await(key)
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
		r.podCreates.forget(key)
		return false, false, nil
	}
	// Asked once: the record goes either way. A pod the API server has and
	// the synced cache lacks is waited for once more (the informer's store
	// may trail its sync point); if the cache still lacks it then, it never
	// will (its label changed) and the cache's word is taken.
	r.podCreates.forget(key)
	switch err := r.APIReader.Get(ctx, key, newObject(p)); {
	case err == nil:
		return true, false, nil
	case apierrors.IsNotFound(err):
		return false, false, nil
	default:
		r.podCreates.wrote(key, "", rv) // not answered: ask again next time
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

// duplicateOf finds the TaskAction, if any, whose events this one's could
// not be told apart from: one with the same action identity that came first
// and either still runs (two runs of one action at once) or was created in the
// same second (the same epoch, see identityEpoch). An earlier one that has
// ended or is being deleted is a previous incarnation: this one is a re-run
// with its own epoch. The one that came first is the one that started (it has
// a status or a pod: it has reported, and its events must stay its own), else
// the one created first, then by namespace/name. started says whether ta has.
func (r *Reconciler) duplicateOf(ctx context.Context, p plugin.Plugin, ta *flytev1.TaskAction, started bool) (*twin, error) {
	ids := actionIdentity(ta)
	if len(ids) == 0 {
		return nil, nil
	}
	l := &flytev1.TaskActionList{}
	if err := r.Client.List(ctx, l, client.MatchingFields{identityIndex: ids[0]}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list TaskActions of %s: %w", ids[0], err)
	}
	for i := range l.Items {
		o := &l.Items[i]
		if o.UID == ta.UID || refusedAsDuplicate(o) {
			// One refused reported nothing under the identity: it blocks nobody.
			continue
		}
		oStarted, err := r.otherStarted(ctx, p, o)
		if err != nil {
			return nil, err
		}
		if !cameFirst(o, oStarted, ta, started) {
			continue
		}
		sameSecond := o.CreationTimestamp.Unix() == ta.CreationTimestamp.Unix()
		running := o.DeletionTimestamp.IsZero() && !o.Status.IsTerminal()
		if running || sameSecond {
			return &twin{Name: o.Namespace + "/" + o.Name, SameSecond: sameSecond}, nil
		}
	}
	return nil, nil
}

// cameFirst says whether a (started or not) takes precedence over b.
func cameFirst(a *flytev1.TaskAction, aStarted bool, b *flytev1.TaskAction, bStarted bool) bool {
	if aStarted != bStarted {
		return aStarted
	}
	return before(a, b)
}

// refusedAsDuplicate says whether ta was refused as another's duplicate.
func refusedAsDuplicate(ta *flytev1.TaskAction) bool {
	es := ta.Status.ErrorState
	return es != nil && es.Code == CodeDuplicateAction && ta.Status.IsTerminal()
}

// hasStarted says whether the status shows that ta has run (or reported).
func hasStarted(ta *flytev1.TaskAction) bool {
	return len(ta.Status.PhaseHistory) > 0 || len(ta.Status.PluginState) > 0
}

// otherStarted says whether another TaskAction has started: by its status, or
// by a pod it controls (its status may be held back).
func (r *Reconciler) otherStarted(ctx context.Context, p plugin.Plugin, o *flytev1.TaskAction) (bool, error) {
	if hasStarted(o) || p == nil {
		return hasStarted(o), nil
	}
	list, err := r.newList(p)
	if err != nil {
		return false, err
	}
	if err := r.Client.List(ctx, list, client.InNamespace(o.Namespace), client.MatchingFields{ownerIndex: string(o.UID)}, client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("list objects of %s: %w", o.Name, err)
	}
	return meta.LenList(list) > 0, nil
}

func before(a, b *flytev1.TaskAction) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

// askCache consults the task-output cache before a launch (and takes the
// reservation of a serializable task). Errors are answers, never failures.
func (r *Reconciler) askCache(ctx context.Context, w World) cacheAnswer {
	key, _ := cacheKey(w)
	a := cacheAnswer{Key: key, Asked: true}
	if w.InputsKey != nil && w.InputsKey.Err != nil {
		a.KeyErr = w.InputsKey.Err
		return a
	}
	if r.Cache == nil {
		a.KeyErr = errors.New("no cache service is configured")
		return a
	}
	if err := key.Validate(); err != nil {
		a.KeyErr = fmt.Errorf("%w (the cache identity needs the task's name and version)", err)
		return a
	}
	entry, err := r.Cache.Get(ctx, key)
	switch {
	case err != nil:
		a.LookupErr = err
		return a
	case entry != nil:
		a.Hit = entry
		return a
	}
	if !serializable(w) {
		return a
	}
	res, err := r.Cache.GetOrExtendReservation(ctx, key, cacheOwner(w), heartbeat(r.Options.RequeueDuration))
	if err != nil {
		log.FromContext(ctx).Info("cache reservation failed, running the task", "key", key.String(), "error", err.Error())
		return a
	}
	if !res.HeldBy(cacheOwner(w)) {
		a.HeldBy = res.Owner
	}
	return a
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

func (o objectReader) Get(ctx context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	if _, ok := out.(*corev1.Pod); ok && o.pods != nil && reflect.TypeOf(o.obj) != reflect.TypeOf(out) {
		return o.pods.Get(ctx, key, out, opts...)
	}
	if key.Name != o.obj.GetName() || key.Namespace != o.obj.GetNamespace() || reflect.TypeOf(out) != reflect.TypeOf(o.obj) {
		return apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(reflect.TypeOf(out).Elem().Name()) + "s"}, key.Name)
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(o.obj).Elem())
	return nil
}

func (o objectReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok && o.pods != nil {
		return o.pods.List(ctx, list, opts...)
	}
	return errors.New("objectReader serves the attempt's object and pods only")
}

// launchClient is the client a plugin launches with: writes go to the API
// server through the normal client, reads go to the API server directly (a
// name conflict must be judged on the live object, which the label-scoped
// cache may not show), and the created or found object is kept.
type launchClient struct {
	client.Client
	live client.Reader
	// name is the attempt's object; only it is kept.
	name   string
	object client.Object
	// created records the create of the attempt's object, whose watch event
	// then wakes no reconcile (writeOrder.echo).
	created *writeOrder
	// found: the object was read, not created by this launch.
	found bool
}

func (c *launchClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if obj.GetName() != c.name {
		return c.Client.Create(ctx, obj, opts...)
	}
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	err := c.created.write(key, "", func() (string, error) {
		err := c.Client.Create(ctx, obj, opts...)
		return obj.GetResourceVersion(), err
	})
	if err == nil {
		c.object = obj
	}
	return err
}

func (c *launchClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	var err error
	if c.live != nil {
		err = c.live.Get(ctx, key, obj, opts...)
	} else {
		err = c.Client.Get(ctx, key, obj, opts...)
	}
	if err == nil && key.Name == c.name {
		c.object, c.found = obj, true
	}
	return err
}
