package controller

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// Kubernetes Event reasons of the cache flow (Warning).
const (
	EventCacheLookupFailed = "CacheLookupFailed"
	EventCachePutFailed    = "CachePutFailed"
	EventCacheSkipped      = "CacheSkipped"
)

// cacheKey is the TaskAction's cache identity, or ok=false when it does not use the cache.
// Until the task's interface and inputs are read here, the key covers the
// task identity and spec.cacheKey only (Flyte's recipe over an empty interface
// and no inputs); a template without a name and version gets a key that fails
// validation, so the cache is skipped.
func cacheKey(ta *flytev1.TaskAction) (cache.Key, bool) {
	if ta.Spec.CacheKey == "" {
		return cache.Key{}, false
	}
	t, err := task.FromTaskAction(ta)
	if err != nil {
		return cache.Key{}, false
	}
	id := t.ID
	scope := cache.Key{Org: cache.DefaultOrg, Project: ta.Spec.Project, Domain: ta.Spec.Domain}
	if id.Name == "" || id.Version == "" {
		return scope, true
	}
	k, err := cache.ComputeKey(cache.KeyInput{
		Task: &core.Identifier{ResourceType: core.ResourceType_TASK, Org: cache.DefaultOrg,
			Project: ta.Spec.Project, Domain: ta.Spec.Domain, Name: id.Name, Version: id.Version},
		Interface: &core.TypedInterface{}, Version: ta.Spec.CacheKey,
	})
	if err != nil {
		return scope, true
	}
	return k, true
}

func cacheOwner(ta *flytev1.TaskAction) string { return ta.Namespace + "/" + ta.Name }

func serializable(ta *flytev1.TaskAction) bool {
	t, err := task.FromTaskAction(ta)
	return err == nil && t.Cache.Serializable
}

// cacheBeforeLaunch consults the cache before the attempt's pod is created.
// It returns a result when the cache decided the reconcile (a hit, or waiting
// for another owner's reservation); otherwise the attempt runs. A cache that
// cannot answer never blocks work: the task then runs.
func (r *Reconciler) cacheBeforeLaunch(ctx context.Context, ta *flytev1.TaskAction, st *flytev1.TaskActionStatus, now time.Time) (*ctrl.Result, error) {
	key, ok := cacheKey(ta)
	if !ok {
		if st.CacheStatus == "" {
			st.CacheStatus = flytev1.CacheDisabled
		}
		return nil, nil
	}
	if st.CacheStatus == flytev1.CacheSkipped || st.CacheStatus == flytev1.CacheLookupFailure {
		return nil, nil // decided earlier: this TaskAction runs without the cache
	}
	if r.Cache == nil {
		st.CacheStatus = flytev1.CacheSkipped
		return nil, nil
	}
	if err := key.Validate(); err != nil {
		st.CacheStatus = flytev1.CacheSkipped
		r.warn(ta, EventCacheSkipped, "ConsultingCache", fmt.Sprintf("not using the cache: %v (the cache identity needs taskTemplate.id.name and .version)", err))
		metrics.CacheLookup(string(st.CacheStatus))
		return nil, nil
	}
	entry, err := r.Cache.Get(ctx, key)
	if err != nil {
		st.CacheStatus = flytev1.CacheLookupFailure
		metrics.CacheLookup(string(st.CacheStatus))
		r.warn(ta, EventCacheLookupFailed, "ConsultingCache", fmt.Sprintf("cache lookup of %s failed, running the task: %v", key, err))
		return nil, nil
	}
	if entry != nil {
		st.CacheStatus = flytev1.CacheHit
		metrics.CacheLookup(string(st.CacheStatus))
		msg := fmt.Sprintf("served from the cache: outputs of %s/%s attempt %d", entry.Source.Run, entry.Source.Action, entry.Source.Attempt)
		t := transition{phase: plugin.PhaseSucceeded, message: msg, at: now, final: true, reason: flytev1.ReasonCompleted, outputURI: entry.OutputURI}
		st.PluginPhaseVersion = nextVersion(ta.Status, st.Attempts)
		ev := r.event(ta, st, t)
		applyTransition(st, t, ta.Generation)
		r.releaseReservation(ctx, ta)
		if err := r.persist(ctx, ta, st, []events.Event{ev}, []string{historyName(t)}); err != nil {
			return nil, err
		}
		return &ctrl.Result{}, r.ensureTerminalMetadata(ctx, ta)
	}
	if st.CacheStatus != flytev1.CacheMiss {
		st.CacheStatus = flytev1.CacheMiss
		metrics.CacheLookup(string(st.CacheStatus))
	}
	if !serializable(ta) {
		return nil, nil
	}
	res, err := r.Cache.GetOrExtendReservation(ctx, key, cacheOwner(ta), r.Options.RequeueDuration)
	if err != nil {
		log.FromContext(ctx).Info("cache reservation failed, running the task", "key", key.String(), "error", err.Error())
		return nil, nil
	}
	if res.HeldBy(cacheOwner(ta)) {
		return nil, nil
	}
	// Another TaskAction computes these outputs: wait for it, and look again.
	t := transition{phase: plugin.PhaseWaitingForResources, at: now,
		message: fmt.Sprintf("waiting for the cache reservation held by %s", res.Owner)}
	if changed(ta.Status, *st, t) {
		st.PluginPhaseVersion = nextVersion(ta.Status, st.Attempts)
		ev := r.event(ta, st, t)
		applyTransition(st, t, ta.Generation)
		if err := r.persist(ctx, ta, st, []events.Event{ev}, []string{historyName(t)}); err != nil {
			return nil, err
		}
	} else if err := r.patchStatus(ctx, ta, st); err != nil {
		return nil, err
	}
	return &ctrl.Result{RequeueAfter: r.Options.RequeueDuration}, nil
}

// heartbeat keeps the reservation of a running serializable attempt alive.
func (r *Reconciler) heartbeat(ctx context.Context, ta *flytev1.TaskAction, st *flytev1.TaskActionStatus) time.Duration {
	key, ok := cacheKey(ta)
	if !ok || r.Cache == nil || !serializable(ta) || st.CacheStatus != flytev1.CacheMiss {
		return 0
	}
	if _, err := r.Cache.GetOrExtendReservation(ctx, key, cacheOwner(ta), r.Options.RequeueDuration); err != nil {
		log.FromContext(ctx).Info("cache reservation heartbeat failed", "key", key.String(), "error", err.Error())
	}
	return r.Options.RequeueDuration
}

// cacheAfterSuccess stores the attempt's outputs; a failure to store them
// never fails the task.
func (r *Reconciler) cacheAfterSuccess(ctx context.Context, ta *flytev1.TaskAction, st *flytev1.TaskActionStatus, t *transition) {
	key, ok := cacheKey(ta)
	if !ok || r.Cache == nil || st.CacheStatus != flytev1.CacheMiss {
		return
	}
	_, err := r.Cache.Put(ctx, key, cache.Entry{
		OutputURI: task.OutputURI(ta, st.Attempts),
		Source:    cache.Source{Project: ta.Spec.Project, Domain: ta.Spec.Domain, Run: ta.Spec.RunName, Action: ta.Spec.ActionName, Attempt: uint32(st.Attempts)},
	})
	if err != nil {
		st.CacheStatus = flytev1.CachePutFailure
		t.message = fmt.Sprintf("the outputs could not be stored in the cache: %v", err)
		r.warn(ta, EventCachePutFailed, "PopulatingCache", t.message)
	} else {
		st.CacheStatus = flytev1.CachePopulated
	}
	r.releaseReservation(ctx, ta)
}

// releaseReservation frees the TaskAction's reservation, if it may hold one.
// Errors are only logged: an unreleased reservation expires by itself.
func (r *Reconciler) releaseReservation(ctx context.Context, ta *flytev1.TaskAction) {
	key, ok := cacheKey(ta)
	if !ok || r.Cache == nil || !serializable(ta) {
		return
	}
	if err := r.Cache.ReleaseReservation(ctx, key, cacheOwner(ta)); err != nil {
		log.FromContext(ctx).Info("could not release the cache reservation; it will expire", "key", key.String(), "error", err.Error())
	}
}
