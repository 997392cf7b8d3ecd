package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// duplicateOf finds the TaskAction, if any, whose events this one's could
// not be told apart from: one with the same action identity that came first
// and either still runs (two runs of one action at once) or was created in the
// same second (the same epoch, see identityEpoch). An earlier one that has
// ended or is being deleted is a previous incarnation: this one is a re-run
// with its own epoch. The one that came first is the one that started (it has
// a status or a pod: it has reported, and its events must stay its own), else
// the one created first, then by namespace/name. started says whether ta has.
func (r *Reconciler) duplicateOf(ctx context.Context, p plugin.Plugin, ta *flytev1.TaskAction, started bool) (*duplicateAction, error) {
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
			return &duplicateAction{Name: o.Namespace + "/" + o.Name, SameSecond: sameSecond}, nil
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
