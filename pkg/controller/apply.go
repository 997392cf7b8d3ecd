package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/plugin"
)

// apply carries out a plan in the order that makes a crash anywhere safe:
//  1. report the events and wait for the events service's acknowledgement
//     (a crash before the status write re-sends them with the same identity);
//  2. persist the status that records them (merge patch, changed fields only);
//  3. destroy: delete pods (exactly the ones gathered: UID precondition),
//     release the cache reservation, then label and let go of the TaskAction.
//
// Nothing is destroyed before the decision that destroys it is durable, so the
// next reconcile always finds the evidence or the decision.
func (r *Reconciler) apply(ctx context.Context, w World, p plugin.Plugin, plan Plan) (ctrl.Result, error) {
	ta := w.TA
	if plan.AddFinalizer {
		if err := r.addFinalizer(ctx, ta); err != nil {
			return ctrl.Result{}, err
		}
	}
	key := client.ObjectKeyFromObject(ta)
	for _, ev := range plan.Events {
		if r.memory.unwrittenEvents.acknowledged(key, ta.UID, ev) {
			continue // acknowledged before, and no status written since (a held-back status)
		}
		if err := r.Recorder.Record(ctx, ev); err != nil {
			r.warn(ta, EventActionEventPublishError, "PublishingActionEvent", fmt.Sprintf("failed to report %s of attempt %d: %v", ev.Phase, ev.Attempt, err))
			r.countTransitions(plan, metrics.OutcomeError)
			return ctrl.Result{}, fmt.Errorf("report %s event of attempt %d: %w", ev.Phase, ev.Attempt, err)
		}
	}
	wrote, err := r.patchStatus(ctx, ta, w.Stored, &plan.Status)
	if err != nil {
		r.countTransitions(plan, metrics.OutcomeError)
		return ctrl.Result{}, err
	}
	if wrote {
		// The status is the record of what was sent and launched again.
		r.memory.unwrittenEvents.forget(key)
		r.memory.launches.forget(key)
	} else {
		r.memory.unwrittenEvents.add(key, ta.UID, plan.Events)
	}
	r.countTransitions(plan, metrics.OutcomeOK)
	r.countPlan(plan)
	for _, wn := range plan.Warnings {
		r.warn(ta, wn.Reason, wn.Action, wn.Note)
	}

	for _, ref := range plan.Delete {
		if err := r.deleteObject(ctx, p, ta.Namespace, ref); err != nil {
			return ctrl.Result{}, err
		}
	}
	if key, ok := reservationKey(w); ok && r.Cache != nil {
		switch {
		case plan.ReleaseReservation:
			if err := r.Cache.ReleaseReservation(ctx, key, cacheOwner(w)); err != nil {
				log.FromContext(ctx).Info("could not release the cache reservation; it will expire", "key", key.String(), "error", err.Error())
			}
		case plan.ExtendReservation:
			if _, err := r.Cache.GetOrExtendReservation(ctx, key, cacheOwner(w), heartbeat(r.Options.RequeueDuration)); err != nil {
				log.FromContext(ctx).Info("cache reservation heartbeat failed", "key", key.String(), "error", err.Error())
			}
		}
	}
	if plan.RemoveFinalizer && p != nil && controllerutil.ContainsFinalizer(ta, flytev1.Finalizer) {
		if err := p.Finalize(ctx, r.Client, r.taskContext(ta, w.Task, max(ta.Status.Attempts, 1), r.Clock.Now())); err != nil {
			return ctrl.Result{}, fmt.Errorf("finalize: %w", err)
		}
	}
	if plan.RemoveFinalizer {
		err := r.patchMeta(ctx, ta, func(o *flytev1.TaskAction) { controllerutil.RemoveFinalizer(o, flytev1.Finalizer) })
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
		}
		r.memory.released.add(client.ObjectKeyFromObject(ta), ta.UID)
	}
	return ctrl.Result{RequeueAfter: plan.WakeAfter}, nil
}

func (r *Reconciler) countTransitions(plan Plan, outcome string) {
	for _, n := range plan.Recorded {
		metrics.Transition(n, outcome)
	}
}

func (r *Reconciler) countPlan(plan Plan) {
	m := plan.Metrics
	if m.Attempt {
		metrics.Attempt()
	}
	if m.LaunchLatency > 0 {
		metrics.ObserveLaunchLatency(m.LaunchLatency)
	}
	if m.TerminalLatency > 0 {
		metrics.ObserveTerminalLatency(m.TerminalLatency)
	}
	if m.Retry {
		metrics.Retry()
	}
	if m.SystemFailure != "" {
		metrics.SystemFailure(m.SystemFailure)
	}
	if m.QuotaRefusal {
		metrics.QuotaRefusal()
	}
	if m.CacheLookup != "" {
		metrics.CacheLookup(m.CacheLookup)
	}
}

// deleteObject deletes exactly the object gathered (UID precondition): a
// successor of the same name, or an object gone already, is left alone.
func (r *Reconciler) deleteObject(ctx context.Context, p plugin.Plugin, namespace string, ref objectRef) error {
	if p == nil || ref.UID == "" {
		return nil
	}
	obj := newObject(p)
	obj.SetNamespace(namespace)
	obj.SetName(ref.Name)
	uid := ref.UID
	err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("delete %s/%s: %w", namespace, ref.Name, err)
}

// patchStatus writes only the status fields that changed, by merge patch,
// and says whether anything was written. Whether anything changed is judged
// on the executor's own view of the status (ownView); the patch is computed
// from the status as stored (stored; nil: ta's), so that it also puts back
// the executor's own values of fields another writer replaced.
func (r *Reconciler) patchStatus(ctx context.Context, ta *flytev1.TaskAction, stored, st *flytev1.TaskActionStatus) (bool, error) {
	if equality.Semantic.DeepEqual(ta.Status, *st) {
		return false, nil
	}
	if stored == nil {
		stored = &ta.Status
	}
	patch, err := statusMergePatch(stored, st)
	if err != nil {
		return false, fmt.Errorf("patch status: %w", err)
	}
	// The API server answers with the object's metadata only: the new
	// resourceVersion is all this reconcile needs back, and the whole
	// TaskAction (its spec the larger part) would be encoded, sent and
	// decoded for nothing.
	m := &metav1.PartialObjectMetadata{TypeMeta: taskActionType, ObjectMeta: metav1.ObjectMeta{Namespace: ta.Namespace, Name: ta.Name}}
	if err := r.memory.taskActionWrites.write(client.ObjectKeyFromObject(ta), ta.ResourceVersion, func() (string, error) {
		err := r.Client.Status().Patch(ctx, m, client.RawPatch(types.MergePatchType, patch))
		return m.ResourceVersion, err
	}); err != nil {
		return false, fmt.Errorf("patch status: %w", err)
	}
	ta.Status, ta.ResourceVersion = *st, m.ResourceVersion
	return true, nil
}

var taskActionType = metav1.TypeMeta{APIVersion: flytev1.GroupVersion.String(), Kind: "TaskAction"}

// statusMergePatch is the JSON merge patch {"status": ...} that turns old into
// new: the difference of the two statuses alone, not of the whole objects
// (their spec, often the larger part, is the same).
func statusMergePatch(old, new *flytev1.TaskActionStatus) ([]byte, error) {
	o, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	n, err := json.Marshal(new)
	if err != nil {
		return nil, err
	}
	diff, err := jsonpatch.CreateMergePatch(o, n)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]json.RawMessage{"status": diff})
}

func (r *Reconciler) warn(ta *flytev1.TaskAction, reason, action, note string) {
	if r.KubeEvents != nil {
		r.KubeEvents.Eventf(ta, nil, corev1.EventTypeWarning, reason, action, "%s", truncate(note, 1024))
	}
}

// patchMeta changes labels or finalizers with a JSON patch that tests the
// finalizer list it replaces: a concurrent change of that list fails the patch
// (and the reconcile retries), while unrelated writes (status, other labels)
// never conflict with it.
func (r *Reconciler) patchMeta(ctx context.Context, ta *flytev1.TaskAction, mutate func(*flytev1.TaskAction)) error {
	err := r.patchMetaOnce(ctx, ta, mutate)
	if !apierrors.IsInvalid(err) || r.APIReader == nil {
		return err
	}
	// The test of the finalizer list failed: our copy was older than the
	// object. Patch once more from what the API server has now.
	live := &flytev1.TaskAction{}
	if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ta), live); gerr != nil {
		return err
	}
	ta.ObjectMeta = live.ObjectMeta
	return r.patchMetaOnce(ctx, ta, mutate)
}

func (r *Reconciler) patchMetaOnce(ctx context.Context, ta *flytev1.TaskAction, mutate func(*flytev1.TaskAction)) error {
	base := ta.DeepCopy()
	mutate(ta)
	ops := metaPatch(base, ta)
	if len(ops) == 0 {
		return nil
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	// Answered with metadata only, as patchStatus is.
	m := &metav1.PartialObjectMetadata{TypeMeta: taskActionType, ObjectMeta: metav1.ObjectMeta{Namespace: ta.Namespace, Name: ta.Name}}
	if err := r.memory.taskActionWrites.write(client.ObjectKeyFromObject(ta), base.ResourceVersion, func() (string, error) {
		err := r.Client.Patch(ctx, m, client.RawPatch(types.JSONPatchType, raw))
		return m.ResourceVersion, err
	}); err != nil {
		ta.ObjectMeta = base.ObjectMeta
		return err
	}
	m.ManagedFields = nil // as the cache keeps it
	ta.ObjectMeta = m.ObjectMeta
	return nil
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// metaPatch lists the JSON patch operations that turn old's labels and
// finalizers into new's.
func metaPatch(old, new *flytev1.TaskAction) []jsonPatchOp {
	var ops []jsonPatchOp
	if !equality.Semantic.DeepEqual(old.Finalizers, new.Finalizers) {
		fins := new.Finalizers
		if fins == nil {
			fins = []string{}
		}
		if old.Finalizers != nil {
			ops = append(ops, jsonPatchOp{Op: "test", Path: "/metadata/finalizers", Value: old.Finalizers})
		}
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/finalizers", Value: fins})
	}
	if !equality.Semantic.DeepEqual(old.Labels, new.Labels) {
		if old.Labels == nil {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/labels", Value: new.Labels})
		} else {
			keys := make([]string, 0, len(new.Labels))
			for k := range new.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if v, ok := old.Labels[k]; !ok || v != new.Labels[k] {
					ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/labels/" + jsonPointerEscape(k), Value: new.Labels[k]})
				}
			}
		}
	}
	return ops
}

func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
