package controller

import (
	"errors"
	"testing"
	"time"

	flytev1 "github.com/taskaction/executor/api/v1"
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
			if p.Status.CacheStatus != tc.want || evs(p.Events) != "1:SUCCEEDED:v37" || !isTerminalStatus(&p.Status) {
				t.Errorf("cacheStatus %s, events %s, finish %v", p.Status.CacheStatus, evs(p.Events), isTerminalStatus(&p.Status))
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
