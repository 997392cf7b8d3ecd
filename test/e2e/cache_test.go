package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/cachesvc/cachesvctest"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
	"github.com/taskaction/executor/pkg/task"
)

// cached makes ta use the cache under key k (the task name and version come from its template).
func cached(ta *flytev1.TaskAction, k string, serial bool) *flytev1.TaskAction {
	ta.Spec.CacheKey = k
	ta.Spec.Template.ID = flytev1.TaskID{Name: "shared.task", Version: "v1"}
	ta.Spec.Template.CacheSerializable = serial
	return ta
}

// keyOf is the Flyte cache key of the task cached() sets up, with cache version k.
func keyOf(k string) cache.Key {
	key, err := cache.ComputeKey(cache.KeyInput{
		Task: &core.Identifier{ResourceType: core.ResourceType_TASK, Org: cache.DefaultOrg, Project: "proj", Domain: "dev",
			Name: "shared.task", Version: "v1"},
		Interface: &core.TypedInterface{}, Version: k,
	})
	if err != nil {
		panic(err)
	}
	return key
}

type services struct {
	events *eventsvctest.Instance
	cache  cache.Client
	ns     string
}

func startAll(t *testing.T) services {
	ev := eventsvctest.Start(t, eventsvctest.Options{})
	cs := cachesvctest.Start(t, cachesvctest.Options{})
	ns := namespace(t)
	startExecutor(t, ns, ev.URL, cs.URL)
	return services{events: ev, cache: cache.NewClient(cs.URL, nil), ns: ns}
}

func TestCacheHitWithoutPod(t *testing.T) {
	s := startAll(t)
	ctx := context.Background()
	if _, err := s.cache.Put(ctx, keyOf("k-hit"), cache.Entry{OutputURI: "s3://b/earlier/run/outputs.pb",
		Source: cache.Source{Project: "proj", Domain: "dev", Run: "earlier", Action: "a", Attempt: 1}}); err != nil {
		t.Fatal(err)
	}
	create(t, cached(taskAction(s.ns, s.ns, "hit"), "k-hit", false))
	ta := waitReason(t, s.ns, "hit", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if ta.Status.CacheStatus != flytev1.CacheHit {
		t.Errorf("cacheStatus = %q", ta.Status.CacheStatus)
	}
	if n := podCount(t, s.ns); n != 0 {
		t.Errorf("a cache hit ran %d pods", n)
	}
	evs, seq := stored(t, s.events.Store, s.ns, "hit")
	if seq != "1:SUCCEEDED" || evs[0].OutputURI != "s3://b/earlier/run/outputs.pb" || evs[0].CacheStatus != "HIT" {
		t.Errorf("events = %s %+v", seq, evs)
	}
}

func TestCacheMissThenPopulate(t *testing.T) {
	s := startAll(t)
	create(t, cached(taskAction(s.ns, s.ns, "first"), "k-pop", false))
	pod := waitPod(t, s.ns, "first-0")
	if ta := waitReason(t, s.ns, "first", flytev1.ConditionProgressing, flytev1.ReasonQueued); ta.Status.CacheStatus != flytev1.CacheMiss {
		t.Errorf("cacheStatus before running = %q, want MISS", ta.Status.CacheStatus)
	}
	kubelet(t, pod, corev1.PodSucceeded, 0)
	ta := waitReason(t, s.ns, "first", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if ta.Status.CacheStatus != flytev1.CachePopulated {
		t.Errorf("cacheStatus = %q, want POPULATED", ta.Status.CacheStatus)
	}
	e, err := s.cache.Get(context.Background(), keyOf("k-pop"))
	if err != nil || e == nil || e.OutputURI != task.OutputURI(ta, 1) || e.Source.Action != "first" {
		t.Fatalf("cache entry = %+v, %v", e, err)
	}
	// The same key again is served from the cache.
	create(t, cached(taskAction(s.ns, s.ns, "second"), "k-pop", false))
	ta = waitReason(t, s.ns, "second", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if ta.Status.CacheStatus != flytev1.CacheHit || podCount(t, s.ns) != 1 {
		t.Errorf("second: cacheStatus %q, pods %d", ta.Status.CacheStatus, podCount(t, s.ns))
	}
}

// TestCacheSerializable: two TaskActions with the same key; only one pod ever
// runs and the other is served from the cache.
func TestCacheSerializable(t *testing.T) {
	s := startAll(t)
	create(t, cached(taskAction(s.ns, s.ns, "one"), "k-serial", true))
	create(t, cached(taskAction(s.ns, s.ns, "two"), "k-serial", true))
	var owner, waiter string
	eventually(t, 20*time.Second, "one pod and one waiter", func() bool {
		for _, n := range []string{"one", "two"} {
			c := meta.FindStatusCondition(get(t, s.ns, n).Status.Conditions, flytev1.ConditionProgressing)
			if c != nil && strings.Contains(c.Message, "waiting for the cache reservation held by "+s.ns+"/") {
				waiter = n
			}
		}
		owner = map[string]string{"one": "two", "two": "one"}[waiter]
		return waiter != "" && podCount(t, s.ns) == 1
	})
	pod := waitPod(t, s.ns, owner+"-0")
	time.Sleep(3 * requeue) // the waiter looks again and again, and keeps waiting
	if podCount(t, s.ns) != 1 {
		t.Fatalf("%d pods while one TaskAction holds the reservation", podCount(t, s.ns))
	}
	kubelet(t, pod, corev1.PodSucceeded, 0)
	ta := waitReason(t, s.ns, waiter, flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if ta.Status.CacheStatus != flytev1.CacheHit {
		t.Errorf("waiter cacheStatus = %q, want HIT", ta.Status.CacheStatus)
	}
	if n := podCount(t, s.ns); n != 1 {
		t.Errorf("%d pods ran, want 1", n)
	}
	if _, seq := stored(t, s.events.Store, s.ns, waiter); seq != "1:WAITING_FOR_RESOURCES 1:SUCCEEDED" {
		t.Errorf("waiter events = %s", seq)
	}
}

// TestCacheOwnerDeleted: the reservation owner is deleted mid-run; its
// reservation is released and the waiter takes over.
func TestCacheOwnerDeleted(t *testing.T) {
	s := startAll(t)
	create(t, cached(taskAction(s.ns, s.ns, "owner"), "k-del", true))
	waitPod(t, s.ns, "owner-0")
	create(t, cached(taskAction(s.ns, s.ns, "waiter"), "k-del", true))
	eventually(t, 20*time.Second, "waiter waiting", func() bool {
		c := meta.FindStatusCondition(get(t, s.ns, "waiter").Status.Conditions, flytev1.ConditionProgressing)
		return c != nil && strings.Contains(c.Message, s.ns+"/owner")
	})
	if err := k8s.Delete(context.Background(), get(t, s.ns, "owner")); err != nil {
		t.Fatal(err)
	}
	pod := waitPod(t, s.ns, "waiter-0")
	kubelet(t, pod, corev1.PodSucceeded, 0)
	ta := waitReason(t, s.ns, "waiter", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if ta.Status.CacheStatus != flytev1.CachePopulated {
		t.Errorf("cacheStatus = %q, want POPULATED", ta.Status.CacheStatus)
	}
}

func TestCacheServiceDown(t *testing.T) {
	ev := eventsvctest.Start(t, eventsvctest.Options{})
	ns := namespace(t)
	startExecutor(t, ns, ev.URL, "http://127.0.0.1:1") // nothing listens there
	create(t, cached(taskAction(ns, ns, "nocache"), "k-down", true))
	pod := waitPod(t, ns, "nocache-0")
	kubelet(t, pod, corev1.PodSucceeded, 0)
	ta := waitReason(t, ns, "nocache", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if ta.Status.CacheStatus != flytev1.CacheLookupFailure {
		t.Errorf("cacheStatus = %q, want LOOKUP_FAILURE", ta.Status.CacheStatus)
	}
	evs, _ := stored(t, ev.Store, ns, "nocache")
	if last := evs[len(evs)-1]; last.CacheStatus != "LOOKUP_FAILURE" {
		t.Errorf("event cache status = %q", last.CacheStatus)
	}
	eventually(t, 10*time.Second, "Warning event CacheLookupFailed", func() bool {
		l := &eventsv1.EventList{}
		_ = k8s.List(context.Background(), l, client.InNamespace(ns))
		for _, e := range l.Items {
			if e.Reason == "CacheLookupFailed" && e.Type == corev1.EventTypeWarning {
				return true
			}
		}
		return false
	})
}
