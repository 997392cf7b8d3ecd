package controller

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// launchClient is the client a plugin launches with: writes go to the API
// server through the normal client, reads go to the API server directly (a
// name conflict must be judged on the live object, which the label-scoped
// cache may not show), and the created or found object is kept.
type launchClient struct {
	client.Client
	live client.Reader
	// pods creates the attempt's pod when set (Reconciler.Pods).
	pods *PodCreator
	// name is the attempt's object; only it is kept.
	name   string
	object client.Object
	// created records the create of the attempt's object, whose watch event
	// then wakes no reconcile (readYourWrites.echo).
	created *readYourWrites
	// found: the object was read, not created by this launch.
	found bool
}

// launch creates the attempt's pod and puts the outcome into w.
func (r *Reconciler) launch(ctx context.Context, w *World, p plugin.Plugin, now time.Time) error {
	attempt := max(w.TA.Status.Attempts, 1)
	tc := r.taskContext(w.TA, w.Task, attempt, now)
	if k := w.InputsKey; k != nil && k.Inputs != nil && readsInputs(p, w.Task) {
		tc.Inputs = k.Inputs // already read for the cache key
	} else if readsInputs(p, w.Task) && r.Storage != nil {
		// The launch uses the inputs (the command renders one, {{.Inputs.x}},
		// or the plugin reads one): read them now, at the edge. A storage
		// failure is a transient launch error, which the decision turns into a
		// system failure with backoff.
		rctx, cancel := context.WithTimeout(ctx, storageTimeout)
		in, err := r.Storage.ReadInputs(rctx, w.TA.Spec.InputURI)
		cancel()
		if err != nil {
			w.Launch = &launchOutcome{Err: fmt.Errorf("read the inputs at %s that the command renders: %w", w.TA.Spec.InputURI, err)}
			return nil
		}
		tc.Inputs = in
	}
	lc := &launchClient{Client: r.Client, live: r.APIReader, pods: r.Pods, name: p.ResourceName(tc), created: r.memory.objectCreates}
	err := p.Launch(ctx, lc, tc)
	w.Launch = &launchOutcome{Err: err}
	if err != nil {
		return nil
	}
	if lc.object == nil {
		// Launched, but the pod could not be read back: the cache will show it.
		w.PodCacheBehind = true
		return nil
	}
	if lc.found {
		// An earlier attempt at the create got through: the cache is behind
		// until it shows this version (a create records itself).
		r.memory.objectCreates.wrote(client.ObjectKeyFromObject(lc.object), "", lc.object.GetResourceVersion())
	}
	r.memory.launches.launched(client.ObjectKeyFromObject(w.TA), launchRecord{TA: w.TA.UID, Attempt: attempt,
		Pod: lc.object.GetUID(), Created: lc.object.GetCreationTimestamp().Time})
	res, derr := r.describe(ctx, p, tc, lc.object)
	if derr != nil {
		return derr
	}
	w.Pod = res
	return nil
}

func (r *Reconciler) taskContext(ta *flytev1.TaskAction, t *task.Task, attempt uint32, now time.Time) plugin.TaskContext {
	return plugin.TaskContext{TaskAction: ta, Task: t, Attempt: int32(attempt), Settings: r.Options.Settings, Now: now}
}
