package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

func TestCacheFlow(t *testing.T) {
	now := t0.Add(time.Minute)
	for _, tc := range []struct {
		name   string
		answer cacheAnswer
		want   flytev1.CacheStatus
	}{
		{"miss", cacheAnswer{Asked: true}, flytev1.CacheMiss},
		{"lookup failure: runs anyway", cacheAnswer{Asked: true, LookupErr: errors.New("unavailable")}, flytev1.CacheLookupFailure},
		{"invalid key: runs without the cache", cacheAnswer{Asked: true, KeyErr: errors.New("task version is required")}, flytev1.CacheSkipped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := cached(t)
			w := worldOf(t, ta, resource{})
			w.Cache = tc.answer
			if p := testDecider.decide(w, now); !p.Launch {
				t.Fatalf("no launch: %+v", p)
			}
			// The decision taken again after the launch records the answer.
			w.Launch = &launchOutcome{}
			w.Pod = ours("pod-1", now, plugin.Observation{Phase: plugin.PhaseQueued})
			w.Pod.Name = "hello-0"
			p := testDecider.decide(w, now)
			if p.Status.CacheStatus != tc.want || len(p.Events) != 1 || p.Events[0].CacheStatus != tc.want.String() {
				t.Errorf("cacheStatus %s, events %+v; want %s", p.Status.CacheStatus, p.Events, tc.want)
			}
		})
	}
}

func TestCachePopulatedAfterSuccess(t *testing.T) {
	for _, tc := range []struct {
		name string
		put  error
		want flytev1.CacheStatus
	}{
		{"stored", nil, flytev1.CachePopulated},
		{"not stored: the task still succeeds", errors.New("unavailable"), flytev1.CachePutFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := runningTA(t, cached(t))
			ta.Status.CacheStatus = flytev1.CacheMiss
			w := worldOf(t, ta, ours("pod-1", t0, succeeded(t0.Add(time.Minute))))
			p := testDecider.decide(w, t0.Add(time.Minute))
			if p.Populate == nil || p.Populate.OutputURI != task.OutputURI(ta, 1) || len(p.Events) != 0 {
				t.Fatalf("populate %+v, events %s", p.Populate, evs(p.Events))
			}
			w.Put = &putOutcome{Err: tc.put}
			p = testDecider.decide(w, t0.Add(time.Minute))
			if p.Status.CacheStatus != tc.want || evs(p.Events) != "1:SUCCEEDED:v37" || !p.Status.IsTerminal() {
				t.Errorf("cacheStatus %s, events %s, finish %v", p.Status.CacheStatus, evs(p.Events), p.Status.IsTerminal())
			}
		})
	}
}

// TestReservationNeverLapses is issue 10, item 11 (the reservation half): a
// running holder extends its reservation at least every maxHeartbeat, even
// with a long requeueDuration.
func TestReservationNeverLapses(t *testing.T) {
	d := testDecider
	d.Backoff = 10 * time.Minute
	ta := runningTA(t, cached(t))
	ta.Status.CacheStatus = flytev1.CacheMiss
	w := worldOf(t, ta, ours("pod-1", t0, running(t0.Add(2*time.Second))))
	w.Task.Cache.Serializable = true
	p := d.decide(w, t0.Add(time.Minute))
	if !p.ExtendReservation || p.WakeAfter > maxHeartbeat {
		t.Errorf("extend %v, wake after %v; want an extension at least every %v", p.ExtendReservation, p.WakeAfter, maxHeartbeat)
	}
	for _, tc := range []struct{ requeue, want time.Duration }{{0, maxHeartbeat}, {10 * time.Second, 10 * time.Second}, {time.Hour, maxHeartbeat}} {
		if got := heartbeat(tc.requeue); got != tc.want {
			t.Errorf("heartbeat(%v) = %v, want %v", tc.requeue, got, tc.want)
		}
	}
}

// serializableCached is a cached typed task whose reservation serialises runs.
func serializableCached(t testing.TB) *flytev1.TaskAction {
	ta := cached(t)
	ta.Spec.Template.CacheSerializable = true
	return ta
}

// TestReservationKeptWhileTheStatusIsHeld is issue 31, item 6: a serializable
// task relaunched with cacheStatus MISS already recorded (after a system
// failure or a retry) keeps its reservation alive while its Queued and
// Executing statuses are held back; it used to lapse after 30 s, and a waiting
// TaskAction then ran the same work.
func TestReservationKeptWhileTheStatusIsHeld(t *testing.T) {
	d := testDecider
	d.QueuedDelay, d.SaturatedDelay, d.ExecutingDelay = 5*time.Second, 5*time.Minute, time.Minute
	ta := serializableCached(t)
	ta.Status.CacheStatus = flytev1.CacheMiss
	pending := worldOf(t, ta, ours("pod-1", t0, plugin.Observation{Phase: plugin.PhaseQueued}))
	pending.Saturated = true
	if p := d.decide(pending, t0.Add(time.Second)); !equalStatus(ta.Status, p.Status) || !p.ExtendReservation || p.WakeAfter > heartbeat(d.Backoff) {
		t.Errorf("Queued held back: status written %v, extend %v, wake %v", !equalStatus(ta.Status, p.Status), p.ExtendReservation, p.WakeAfter)
	}
	run := worldOf(t, ta, ours("pod-1", t0, running(t0.Add(2*time.Second))))
	run.Saturated = true
	if p := d.decide(run, t0.Add(3*time.Second)); !equalStatus(ta.Status, p.Status) || !p.ExtendReservation || p.WakeAfter > heartbeat(d.Backoff) {
		t.Errorf("Executing held back: status written %v, extend %v, wake %v", !equalStatus(ta.Status, p.Status), p.ExtendReservation, p.WakeAfter)
	}
}

// TestReservationReleasedUnderItsOwnKey is issue 31, item 14: the key of a
// reservation is recorded when it is taken, and a TaskAction deleted, or whose
// spec no longer decodes, releases it under that key (it used to release under
// a key it never computed, and the reservation lapsed instead).
func TestReservationReleasedUnderItsOwnKey(t *testing.T) {
	ta := serializableCached(t)
	w := worldOf(t, ta, ours("pod-1", t0, plugin.Observation{Phase: plugin.PhaseQueued}))
	w.Launch, w.Cache = &launchOutcome{}, cacheAnswer{Asked: true, Key: cache.Key{Org: "o", Project: "p", Domain: "d", Key: "recorded"}}
	launched := applied(ta, testDecider.decide(w, t0))
	if k := reservationOf(&launched.Status); k == nil || k.Key != "recorded" {
		t.Fatalf("reservation recorded at the launch: %+v", k)
	}

	deleted := launched.DeepCopy()
	deleted.DeletionTimestamp = ptrTo(metav1.NewTime(t0.Add(time.Minute)))
	deleted.Spec.CacheKey = "edited"
	dw := worldOf(t, deleted, ours("pod-1", t0, running(t0.Add(time.Second))))
	p := testDecider.decide(dw, t0.Add(time.Minute))
	if k, ok := reservationKey(dw); !p.ReleaseReservation || !ok || k.Key != "recorded" {
		t.Errorf("deleted: release %v under %+v; want the recorded key", p.ReleaseReservation, k)
	}

	invalid := launched.DeepCopy()
	invalid.Spec.Template = nil
	iw := worldOf(t, invalid, ours("pod-1", t0, running(t0.Add(time.Second))))
	p = testDecider.decide(iw, t0.Add(time.Minute))
	if k, ok := reservationKey(iw); iw.SpecErr == nil || !p.ReleaseReservation || !ok || k.Key != "recorded" || reservationOf(&p.Status) != nil {
		t.Errorf("spec no longer decodes (%v): release %v under %+v, still recorded %v; want released under the recorded key", iw.SpecErr, p.ReleaseReservation, k, reservationOf(&p.Status))
	}
}

// TestAnotherWritersCacheStatusIsNotTheExecutors is issue 35, item 3: Flyte's
// actions service writes the whole status with its own cacheStatus (here
// SKIPPED, 6); the executor still consults the cache and reports its own
// observation.
func TestAnotherWritersCacheStatusIsNotTheExecutors(t *testing.T) {
	ta := cached(t)
	ta.Status.CacheStatus, ta.Status.Attempts = flytev1.CacheSkipped, 3 // before the executor wrote anything
	ownView(&ta.Status)
	if w := worldOf(t, ta, resource{}); !shouldAskCache(w) || ta.Status.Attempts != 0 {
		t.Fatalf("another writer's SKIPPED and attempts 3 on a new TaskAction: asks the cache %v, attempts %d", shouldAskCache(w), ta.Status.Attempts)
	}
	w := worldOf(t, ta, ours("pod-1", t0, plugin.Observation{Phase: plugin.PhaseQueued}))
	w.Launch, w.Cache = &launchOutcome{}, cacheAnswer{Asked: true}
	launched := applied(ta, testDecider.decide(w, t0))
	running := applied(launched, testDecider.decide(worldOf(t, launched, ours("pod-1", t0, running(t0.Add(time.Second)))), t0.Add(time.Second)))

	// The actions service writes SKIPPED and another attempt count.
	stored := running.DeepCopy()
	stored.Status.CacheStatus, stored.Status.Attempts = flytev1.CacheSkipped, 2
	view := stored.DeepCopy()
	ownView(&view.Status)
	if view.Status.CacheStatus != flytev1.CacheMiss || view.Status.Attempts != 1 {
		t.Fatalf("own view: cacheStatus %s, attempts %d; want MISS and 1", view.Status.CacheStatus, view.Status.Attempts)
	}
	sw := worldOf(t, view, ours("pod-1", t0, succeeded(t0.Add(time.Minute))))
	sw.Put = &putOutcome{}
	p := testDecider.decide(sw, t0.Add(time.Minute))
	if len(p.Events) != 1 || p.Events[0].CacheStatus != flytev1.CachePopulated.String() || p.Events[0].Attempt != 1 {
		t.Fatalf("SUCCEEDED event: %+v; want attempt 1 with CACHE_POPULATED", p.Events)
	}
	patch, err := statusMergePatch(&stored.Status, &p.Status)
	if err != nil || !strings.Contains(string(patch), `"attempts":1`) || !strings.Contains(string(patch), fmt.Sprintf(`"cacheStatus":%d`, flytev1.CachePopulated)) {
		t.Errorf("the patch from the stored status does not put the executor's values back: %s %v", patch, err)
	}
}
