package controller

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"google.golang.org/protobuf/proto"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/storage/layout"
	"github.com/taskaction/executor/pkg/task"
)

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
		return &runtimeError{StorageErr: fmt.Errorf("read %s/%s: %w", prefix, layout.ErrorFile, err)}, nil
	}
	e := &runtimeError{Doc: doc}
	if !e.found() && pod.Obs.Phase == plugin.PhaseSucceeded && declaresOutputs(t) {
		// A success must leave the outputs its interface declares: the parent
		// reads them at this URI.
		ok, err := r.Storage.OutputsExist(ctx, prefix)
		if err != nil {
			return &runtimeError{StorageErr: fmt.Errorf("check %s/%s: %w", prefix, layout.OutputsFile, err)}, nil
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
