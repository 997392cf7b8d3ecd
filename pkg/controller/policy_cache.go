package controller

import (
	"fmt"
	"time"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// Kubernetes Event reasons of the cache flow (Warning).
const (
	EventCacheLookupFailed = "CacheLookupFailed"
	EventCachePutFailed    = "CachePutFailed"
	EventCacheSkipped      = "CacheSkipped"
)

// cacheKey is the TaskAction's cache identity, or ok=false when it does not
// use the cache (no spec.cacheKey, and the template is not discoverable).
// Until the task's interface and inputs are read in gather, the key covers the
// task identity and the cache version only (Flyte's recipe over an empty
// interface and no inputs); a template without a name and version gets a key
// that fails validation, so the cache is skipped.
func cacheKey(w World) (cache.Key, bool) {
	t := w.Task
	if t == nil {
		return cache.Key{}, false
	}
	version := w.TA.Spec.CacheKey
	if version == "" && t.Cache.Enabled {
		version = t.Cache.Version
	}
	if version == "" {
		return cache.Key{}, false
	}
	scope := cache.Key{Org: cache.DefaultOrg, Project: w.TA.Spec.Project, Domain: w.TA.Spec.Domain}
	if t.ID.Name == "" || t.ID.Version == "" {
		return scope, true
	}
	k, err := cache.ComputeKey(cache.KeyInput{
		Task: &core.Identifier{ResourceType: core.ResourceType_TASK, Org: cache.DefaultOrg,
			Project: w.TA.Spec.Project, Domain: w.TA.Spec.Domain, Name: t.ID.Name, Version: t.ID.Version},
		Interface: &core.TypedInterface{}, Version: version,
	})
	if err != nil {
		return scope, true
	}
	return k, true
}

// maxHeartbeat is the longest heartbeat interval cache services accept (ours
// clamps to it): a reservation is extended at least this often, whatever
// requeueDuration is, so that it never lapses while its holder runs.
const maxHeartbeat = time.Minute

// heartbeat is how often a held reservation is extended, and the interval
// announced to the cache service.
func heartbeat(requeue time.Duration) time.Duration {
	if requeue <= 0 {
		return maxHeartbeat
	}
	return min(requeue, maxHeartbeat)
}

func cacheOwner(w World) string { return w.TA.Namespace + "/" + w.TA.Name }

func serializable(w World) bool {
	_, ok := cacheKey(w)
	return ok && w.Task.Cache.Serializable
}

// shouldAskCache says whether gather consults the cache for this attempt's
// next launch: the cache is on and was not given up on for this TaskAction.
func shouldAskCache(w World) bool {
	_, ok := cacheKey(w)
	cs := w.TA.Status.CacheStatus
	return ok && cs != flytev1.CacheSkipped && cs != flytev1.CacheLookupFailure
}

type cacheEntry struct {
	Key   cache.Key
	Entry cache.Entry
}

func cacheEntryOf(w World, key cache.Key, attempt uint32) cacheEntry {
	ta := w.TA
	return cacheEntry{Key: key, Entry: cache.Entry{
		OutputURI: task.OutputURI(ta, int32(attempt)),
		Source:    cache.Source{Project: ta.Spec.Project, Domain: ta.Spec.Domain, Run: ta.Spec.RunName, Action: ta.Spec.ActionName, Attempt: attempt},
	}}
}

// noteCacheAnswer records what the cache said in the status (MISS, or why
// the task runs without the cache), with its warning. It applies both to the
// decision before a launch and to the one taken again after it.
func (d decider) noteCacheAnswer(p *Plan, w World) {
	st := &p.Status
	a := w.Cache
	if _, ok := cacheKey(w); !ok || !a.Asked || a.Hit != nil {
		return
	}
	switch {
	case a.KeyErr != nil:
		st.CacheStatus = flytev1.CacheSkipped
		p.Metrics.CacheLookup = st.CacheStatus.String()
		p.Warnings = append(p.Warnings, warning{EventCacheSkipped, "ConsultingCache",
			fmt.Sprintf("not using the cache: %v (the cache identity needs the task's name and version)", a.KeyErr)})
	case a.LookupErr != nil:
		st.CacheStatus = flytev1.CacheLookupFailure
		p.Metrics.CacheLookup = st.CacheStatus.String()
		p.Warnings = append(p.Warnings, warning{EventCacheLookupFailed, "ConsultingCache",
			fmt.Sprintf("cache lookup of %s failed, running the task: %v", a.Key, a.LookupErr)})
	case st.CacheStatus != flytev1.CacheMiss:
		st.CacheStatus = flytev1.CacheMiss
		p.Metrics.CacheLookup = st.CacheStatus.String()
	}
}

// consultCache applies the cache's answer before a launch. It returns true
// when the answer decided the step (a hit, or another holder's reservation);
// a cache that cannot answer never blocks work.
func (d decider) consultCache(p *Plan, w World, now time.Time, s attemptState) bool {
	st := &p.Status
	a := w.Cache
	if _, ok := cacheKey(w); !ok || !a.Asked {
		return false
	}
	attempt := max(st.Attempts, 1)
	d.noteCacheAnswer(p, w)
	switch {
	case a.Hit != nil:
		st.CacheStatus = flytev1.CacheHit
		p.Metrics.CacheLookup = st.CacheStatus.String()
		src := a.Hit.Source
		d.final(p, w, now, transition{attempt: attempt, phase: plugin.PhaseSucceeded, at: now, reason: flytev1.ReasonCompleted,
			outputURI: a.Hit.OutputURI, message: fmt.Sprintf("served from the cache: outputs of %s/%s attempt %d", src.Run, src.Action, src.Attempt)})
		return true
	case a.KeyErr == nil && a.LookupErr == nil && a.HeldBy != "":
		// Another TaskAction computes these outputs: wait for it, and look again.
		d.progress(p, w, now, s, transition{attempt: attempt, phase: plugin.PhaseWaitingForResources, at: now,
			message: fmt.Sprintf("waiting for the cache reservation held by %s", a.HeldBy)})
		p.WakeAfter = 0
		p.wake(d.Backoff)
		return true
	}
	return false
}
