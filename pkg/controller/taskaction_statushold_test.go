package controller

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// TestQueuedStatusDelay: a new pod's Queued status is held back for the
// delay after its creation. Its QUEUED event goes out at once and is the same
// event on every reconcile meanwhile; a pod that starts within the delay gets
// Queued and Executing in one status write at once (Flyte's control plane
// shows an action as running only from the TaskAction's conditions); one
// still pending after the delay gets its Queued status then; one that ends
// within it, its end alone. A launch whose plan writes something else (the
// cache's answer) is not held back.
func TestQueuedStatusDelay(t *testing.T) {
	d := testDecider
	d.QueuedDelay = 5 * time.Second
	ta := newTA(0)
	pending := func(msg string) resource {
		return ours("pod-1", t0, plugin.Observation{Phase: plugin.PhaseInitializing, Message: msg})
	}
	w := worldOf(t, ta, ours("pod-1", t0, plugin.Observation{Phase: plugin.PhaseQueued}))
	w.Launch = &launchOutcome{}
	launch := d.decide(w, t0)
	if evs(launch.Events) != "1:QUEUED:v1" || !reflect.DeepEqual(launch.Status, ta.Status) || launch.WakeAfter <= 0 || launch.WakeAfter > 5*time.Second {
		t.Fatalf("launch: events %s, status written %v, wake %v", evs(launch.Events), !reflect.DeepEqual(launch.Status, ta.Status), launch.WakeAfter)
	}
	meanwhile := d.decide(worldOf(t, ta, pending("ContainerCreating")), t0.Add(2*time.Second))
	if len(meanwhile.Events) != 1 || !reflect.DeepEqual(meanwhile.Events[0], launch.Events[0]) || !reflect.DeepEqual(meanwhile.Status, ta.Status) {
		t.Errorf("within the delay: events %s (same as the launch's: %v), status written %v",
			evs(meanwhile.Events), len(meanwhile.Events) == 1 && reflect.DeepEqual(meanwhile.Events[0], launch.Events[0]), !reflect.DeepEqual(meanwhile.Status, ta.Status))
	}
	started := d.decide(worldOf(t, ta, ours("pod-1", t0, running(t0.Add(3*time.Second)))), t0.Add(3*time.Second))
	if evs(started.Events) != "1:QUEUED:v1 1:RUNNING:v20" || !reflect.DeepEqual(started.Events[0], launch.Events[0]) ||
		historyOf(started.Status) != "Queued,Executing" || started.Status.Attempts != 1 {
		t.Errorf("started within the delay: events %s, history %s, attempts %d; want Executing written at once",
			evs(started.Events), historyOf(started.Status), started.Status.Attempts)
	}
	ended := d.decide(worldOf(t, ta, ours("pod-1", t0, succeeded(t0.Add(4*time.Second)))), t0.Add(4*time.Second))
	if evs(ended.Events) != "1:QUEUED:v1 1:SUCCEEDED:v21" || !applied(ta, ended).Status.IsTerminal() {
		t.Errorf("ended within the delay: events %s, history %s", evs(ended.Events), historyOf(ended.Status))
	}
	late := d.decide(worldOf(t, ta, pending("ContainerCreating")), t0.Add(6*time.Second))
	if evs(late.Events) != "1:QUEUED:v1" || !reflect.DeepEqual(late.Events[0], launch.Events[0]) || historyOf(late.Status) != "Queued" {
		t.Errorf("still pending after the delay: events %s, history %s", evs(late.Events), historyOf(late.Status))
	}

	w = worldOf(t, cached(t), ours("pod-1", t0, plugin.Observation{Phase: plugin.PhaseQueued}))
	w.Launch, w.Cache = &launchOutcome{}, cacheAnswer{Asked: true}
	if p := d.decide(w, t0); p.Status.CacheStatus != flytev1.CacheMiss || historyOf(p.Status) != "Queued" {
		t.Errorf("a launch that records the cache's answer: cacheStatus %s, history %s; want both written at once", p.Status.CacheStatus, historyOf(p.Status))
	}
}

// TestExecutingHeldOnlyWhileSaturated: while the executor is short of
// capacity, a pod that started with nothing of it recorded has its Executing
// status held back, at most ExecutingDelay after its start (then written,
// whatever the saturation), so that a task that ends within it costs one
// status write; its QUEUED and RUNNING are reported at once meanwhile.
func TestExecutingHeldOnlyWhileSaturated(t *testing.T) {
	d := testDecider
	d.QueuedDelay, d.SaturatedDelay, d.ExecutingDelay = 5*time.Second, 5*time.Minute, 10*time.Second
	ta := newTA(0)
	start := t0.Add(time.Second)
	w := worldOf(t, ta, ours("pod-1", t0, running(start)))
	w.Saturated = true
	held := d.decide(w, t0.Add(3*time.Second))
	if evs(held.Events) != "1:QUEUED:v1 1:RUNNING:v20" || !reflect.DeepEqual(held.Status, ta.Status) ||
		held.WakeAfter <= 0 || held.WakeAfter > 8*time.Second || !held.HeldWhileSaturated {
		t.Errorf("saturated, running 2s: events %s, status written %v, wake %v, held while saturated %v; want held back, wake by the hold's end, marked",
			evs(held.Events), !reflect.DeepEqual(held.Status, ta.Status), held.WakeAfter, held.HeldWhileSaturated)
	}
	if p := d.decide(w, start.Add(d.ExecutingDelay)); historyOf(p.Status) != "Queued,Executing" {
		t.Errorf("saturated, running for ExecutingDelay: history %q, want Executing written", historyOf(p.Status))
	}
	w.Saturated = false
	if p := d.decide(w, t0.Add(3*time.Second)); historyOf(p.Status) != "Queued,Executing" {
		t.Errorf("not saturated, running 2s: history %q, want Executing written at once", historyOf(p.Status))
	}
}

// TestHeldLaunchDeletedExternally: a pod launched with its Queued held back
// that disappears is counted as a system failure from the launch this process
// remembers, as if its launch had been recorded; the status then records its
// Queued under the version its QUEUED was reported with, and that QUEUED goes
// with it again (the same event: were the launch's report lost, the history
// would have an entry without its event), and the relaunched pod's QUEUED gets
// the next version.
func TestHeldLaunchDeletedExternally(t *testing.T) {
	d := testDecider
	d.QueuedDelay = 5 * time.Second
	ta := newTA(0)
	w := worldOf(t, ta, ours("pod-1", t0, plugin.Observation{Phase: plugin.PhaseQueued}))
	w.Launch = &launchOutcome{}
	launch := d.decide(w, t0)
	if evs(launch.Events) != "1:QUEUED:v1" || !reflect.DeepEqual(launch.Status, ta.Status) {
		t.Fatalf("launch: events %s, status written %v; want the Queued held back", evs(launch.Events), !reflect.DeepEqual(launch.Status, ta.Status))
	}

	gone := worldOf(t, ta, resource{})
	if p := d.decide(gone, t0.Add(time.Second)); p.Status.SystemFailures != 0 || !p.Launch {
		t.Fatalf("without the launch remembered (a restart): system failures %d, relaunch %v; want 0 and a relaunch", p.Status.SystemFailures, p.Launch)
	}
	gone.LaunchInFlight = &launchRecord{TA: ta.UID, Attempt: 1, Pod: "pod-1", Created: t0}
	p := d.decide(gone, t0.Add(time.Second))
	if p.Status.SystemFailures != 1 || p.Launch || len(p.Events) != 1 || !reflect.DeepEqual(p.Events[0], launch.Events[0]) || historyOf(p.Status) != "Queued" ||
		int32(p.Status.PluginPhaseVersion) != launch.Events[0].Version || readState(&p.Status, 1).RetryAt == nil || readState(&p.Status, 1).Pod != "" {
		t.Fatalf("remembered launch, pod gone: system failures %d, relaunch %v, events %s, history %s, version %d (QUEUED's %d), state %+v",
			p.Status.SystemFailures, p.Launch, evs(p.Events), historyOf(p.Status), p.Status.PluginPhaseVersion, launch.Events[0].Version, readState(&p.Status, 1))
	}
	failed := applied(ta, p)
	w = worldOf(t, failed, ours("pod-2", t0.Add(20*time.Second), plugin.Observation{Phase: plugin.PhaseQueued}))
	w.Launch = &launchOutcome{}
	relaunch := d.decide(w, t0.Add(20*time.Second))
	if len(relaunch.Events) != 1 || relaunch.Events[0].Version == launch.Events[0].Version {
		t.Errorf("relaunch: events %s; want one QUEUED with a version after the first pod's", evs(relaunch.Events))
	}
}

// TestSaturationHoldsStatusesLonger: while the executor is saturated, a new
// pod's Queued status is held back up to SaturatedDelay, woken at the hold's
// end and marked to be woken when the saturation ends (no timed rechecks).
func TestSaturationHoldsStatusesLonger(t *testing.T) {
	d := testDecider
	d.QueuedDelay, d.SaturatedDelay = 5*time.Second, 5*time.Minute
	ta := newTA(0)
	w := worldOf(t, ta, ours("pod-1", t0, plugin.Observation{Phase: plugin.PhaseQueued}))
	w.Saturated = true
	if p := d.decide(w, t0.Add(30*time.Second)); !reflect.DeepEqual(p.Status, ta.Status) || p.WakeAfter != d.SaturatedDelay-30*time.Second || !p.HeldWhileSaturated {
		t.Errorf("saturated, 30s after creation: status written %v, wake %v, held while saturated %v; want held back, wake at the hold's end (%v), marked",
			!reflect.DeepEqual(p.Status, ta.Status), p.WakeAfter, p.HeldWhileSaturated, d.SaturatedDelay-30*time.Second)
	}
	if p := d.decide(w, t0.Add(d.SaturatedDelay-10*time.Second)); !reflect.DeepEqual(p.Status, ta.Status) || p.WakeAfter != 10*time.Second || !p.HeldWhileSaturated {
		t.Errorf("saturated, 10s before the hold's end: status written %v, wake %v; want held back, wake at the hold's end (10s)", !reflect.DeepEqual(p.Status, ta.Status), p.WakeAfter)
	}
	if p := d.decide(w, t0.Add(d.SaturatedDelay)); historyOf(p.Status) != "Queued" {
		t.Errorf("saturated for SaturatedDelay: history %q, want Queued written", historyOf(p.Status))
	}
	w.Saturated = false
	if p := d.decide(w, t0.Add(2*time.Second)); !reflect.DeepEqual(p.Status, ta.Status) || p.WakeAfter != 3*time.Second || p.HeldWhileSaturated {
		t.Errorf("not saturated, 2s after creation: wake %v, held while saturated %v; want held back by QueuedDelay only, woken at its end (3s), not marked", p.WakeAfter, p.HeldWhileSaturated)
	}
	if p := d.decide(w, t0.Add(30*time.Second)); historyOf(p.Status) != "Queued" {
		t.Errorf("not saturated, 30s after creation: history %q, want Queued written", historyOf(p.Status))
	}
	w.Saturated = true
	unextended := d
	unextended.SaturatedDelay = 0
	if p := unextended.decide(w, t0.Add(30*time.Second)); historyOf(p.Status) != "Queued" {
		t.Errorf("SaturatedDelay 0, saturated, 30s after creation: history %q, want Queued written (the hold is QueuedDelay)", historyOf(p.Status))
	}
	d.QueuedDelay = 0
	if p := d.decide(w, t0.Add(time.Second)); historyOf(p.Status) != "Queued" {
		t.Errorf("delay off, saturated: history %q, want Queued written at once", historyOf(p.Status))
	}
}

// TestLiftHeldStatuses: statuses held back while saturated are woken when the
// saturation ends, each once and after anything else queued, and a lifted
// one is written even if the saturation is back by its reconcile.
func TestLiftHeldStatuses(t *testing.T) {
	r := newRig(t, 0)
	ctx := context.Background()
	rec := r.reconciler()
	rec.Options.QueuedStatusDelay, rec.Options.SaturatedStatusDelay, rec.Options.ExecutingStatusDelay = 5*time.Second, 5*time.Minute, 5*time.Minute
	q := &fakeQueue{waiting: 1}
	rec.setQueue(q)
	pressed := false
	rec.pressed = func() bool { return pressed }
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "hello"}}
	r.createTA(newTA(0))
	if _, err := rec.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	r.clock.Step(10 * time.Second)
	res, err := rec.Reconcile(ctx, req)
	if ta, _ := r.ta(); err != nil || len(ta.Status.PhaseHistory) != 0 || res.RequeueAfter != 290*time.Second {
		t.Fatalf("saturated, 10s after the launch: err %v, history %v, wake %v; want the Queued held, woken at the hold's end (290s)", err, ta.Status.PhaseHistory, res.RequeueAfter)
	}
	if n := rec.liftHeldStatuses(); n != 0 {
		t.Fatalf("still saturated (a TaskAction waits): %d woken", n)
	}
	q.waiting, pressed = 0, true
	if n := rec.liftHeldStatuses(); n != 0 {
		t.Fatalf("still saturated (the API server was pressed): %d woken", n)
	}
	pressed = false
	if n := rec.liftHeldStatuses(); n != 1 || len(q.added) != 1 || q.added[0] != req || q.priority[0] != liftPriority {
		t.Fatalf("saturation over: %d woken, queued %v at %v; want %v at priority %d", n, q.added, q.priority, req, liftPriority)
	}
	if n := rec.liftHeldStatuses(); n != 0 {
		t.Fatalf("lifted twice: %d woken", n)
	}
	q.waiting = 1 // saturated again by the time of the reconcile
	pod, _ := r.pod("hello-0")
	r.setPod(pod, corev1.PodRunning, "", 0)
	if _, err := rec.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	ta, _ := r.ta()
	if historyOf(ta.Status) != "Queued,Executing" {
		t.Fatalf("lifted, running, saturated again: history %q; want Queued and Executing written", historyOf(ta.Status))
	}
	if rec.memory.heldStatuses.waiting() || rec.memory.heldStatuses.lifted(req.NamespacedName, ta.UID) {
		t.Error("a written status is still remembered as held")
	}
}
