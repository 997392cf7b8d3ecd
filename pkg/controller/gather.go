package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
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
		r.memory.objectCreates.forget(key)
	}
	if readState(&ta.Status, attempt).Pod == "" {
		w.LaunchInFlight = r.memory.launches.get(client.ObjectKeyFromObject(ta), ta.UID, attempt)
	}
	// A hold lifted when the saturation ended is not held again by its return.
	w.Saturated = r.saturated() && !r.memory.heldStatuses.lifted(client.ObjectKeyFromObject(ta), ta.UID)
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
	started := hasStarted(ta) || w.Pod.Holder == holderUs || w.LaunchInFlight != nil
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

// storageTimeout bounds one read of blob storage: an outage is a system
// failure with backoff, never a hang.
const storageTimeout = 30 * time.Second

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

func (c *launchClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if obj.GetName() != c.name {
		return c.Client.Create(ctx, obj, opts...)
	}
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	err := c.created.write(key, "", func() (string, error) {
		var err error
		if pod, ok := obj.(*corev1.Pod); ok && c.pods != nil {
			err = c.pods.Create(ctx, pod, opts...)
		} else {
			err = c.Client.Create(ctx, obj, opts...)
		}
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
