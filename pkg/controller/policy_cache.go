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
// use the cache. A Flyte-form template is cached when it is discoverable, and
// keyed by Flyte's recipe over its identity, interface and inputs (gather
// computes it: until it has, or when it could not, the key is the scope alone,
// which fails validation, so the cache is skipped). The typed form is cached
// when spec.cacheKey is set, keyed by the task identity and that version; a
// template without a name and version gets a key that fails validation.
func cacheKey(w World) (cache.Key, bool) {
	t := w.Task
	if t == nil {
		return cache.Key{}, false
	}
	scope := cache.Key{Org: cache.DefaultOrg, Project: w.TA.Spec.Project, Domain: w.TA.Spec.Domain}
	if keyedByInputs(t) {
		if k := w.InputsKey; k != nil && k.StorageErr == nil && k.Err == nil {
			return k.Key, true
		}
		return scope, true
	}
	version := cacheVersion(w)
	if version == "" {
		return cache.Key{}, false
	}
	if t.ID.Name == "" || t.ID.Version == "" {
		return scope, true
	}
	k, err := cache.ComputeKey(cache.KeyInput{
		Task: taskIdentity(w), Interface: &core.TypedInterface{}, Version: version,
	})
	if err != nil {
		return scope, true
	}
	return k, true
}

// keyedByInputs says whether the task's cache key covers its inputs: a
// discoverable Flyte-form template (Flyte's recipe).
func keyedByInputs(t *task.Task) bool { return t.Form == task.FormFlyte && t.Cache.Enabled }

// cacheVersion is the cache version: spec.cacheKey, else the template's
// discovery version.
func cacheVersion(w World) string {
	if v := w.TA.Spec.CacheKey; v != "" {
		return v
	}
	if w.Task.Cache.Enabled {
		return w.Task.Cache.Version
	}
	return ""
}

// taskIdentity is the task's identifier as the cache stores it: a Flyte-form
// template's as it is (Flyte's executor stores that one), a typed one's
// scoped by cache.DefaultOrg and the TaskAction's project and domain.
func taskIdentity(w World) *core.Identifier {
	id := w.Task.ID
	org, project, domain := id.Org, id.Project, id.Domain
	if keyedByInputs(w.Task) {
		return &core.Identifier{ResourceType: core.ResourceType_TASK, Org: org, Project: project, Domain: domain, Name: id.Name, Version: id.Version}
	}
	if org == "" {
		org = cache.DefaultOrg
	}
	if project == "" || domain == "" {
		project, domain = w.TA.Spec.Project, w.TA.Spec.Domain
	}
	return &core.Identifier{ResourceType: core.ResourceType_TASK, Org: org, Project: project, Domain: domain, Name: id.Name, Version: id.Version}
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

// holdsReservation says whether this TaskAction may hold a cache
// reservation: one is recorded in its status, or its task is serializable.
func holdsReservation(w World) bool {
	return reservationOf(&w.TA.Status) != nil || serializable(w)
}

// reservationKey is the key of the reservation this TaskAction holds: the
// one recorded when it was taken (the spec may have changed since, or no
// longer decode), else the task's cache key.
func reservationKey(w World) (cache.Key, bool) {
	if k := reservationOf(&w.TA.Status); k != nil {
		return *k, true
	}
	if !serializable(w) {
		return cache.Key{}, false
	}
	return cacheKey(w)
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
		OutputURI: task.OutputURI(ta, int32(attempt)), Task: taskIdentity(w),
		Source: cache.Source{Project: ta.Spec.Project, Domain: ta.Spec.Domain, Run: ta.Spec.RunName, Action: ta.Spec.ActionName, Attempt: attempt},
	}}
}

// cacheVerdict is the verdict of the cache's answer before a launch: a hit
// ends the TaskAction with the cached outputs; another holder's reservation
// means wait for it and look again; anything else (a miss, a cache that
// cannot answer) does not decide: a cache never blocks work.
func (d decider) cacheVerdict(w World, now time.Time, s attemptState, attempt uint32) verdict {
	a := w.Cache
	if _, ok := cacheKey(w); !ok || !a.Asked {
		return verdict{}
	}
	switch {
	case a.Hit != nil:
		src := a.Hit.Source
		v := ends(transition{attempt: attempt, phase: plugin.PhaseSucceeded, at: now, reason: flytev1.ReasonCompleted,
			outputURI: a.Hit.OutputURI, cacheSource: &src, message: fmt.Sprintf("served from the cache: outputs of %s/%s attempt %d", src.Run, src.Action, src.Attempt)})
		v.cacheHit = true
		return v
	case a.KeyErr == nil && a.LookupErr == nil && a.HeldBy != "":
		// Another TaskAction computes these outputs: wait for it, and look again.
		return verdict{kind: verdictProgress, state: s, wake: d.Backoff, wakeOnly: true,
			t: transition{attempt: attempt, phase: plugin.PhaseWaitingForResources, at: now,
				message: fmt.Sprintf("waiting for the cache reservation held by %s", a.HeldBy)}}
	}
	return verdict{}
}
