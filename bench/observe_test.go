package main

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// clock is a fake time for the observer: each event happens at the time
// the test sets, so no number depends on how fast the test runs.
type clock struct{ t time.Time }

func (c *clock) at(ms int)      { c.t = time.Unix(1_000_000, 0).Add(time.Duration(ms) * time.Millisecond) }
func (c *clock) now() time.Time { return c.t }

func benchPod(name, owner string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{Kind: "TaskAction", Name: owner}}},
		Status: corev1.PodStatus{Phase: phase}}
}

func benchTA(name, rv string, finalizers []string, conds ...metav1.Condition) *flytev1.TaskAction {
	return &flytev1.TaskAction{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Finalizers: finalizers},
		Status: flytev1.TaskActionStatus{Conditions: conds}}
}

func cond(typ, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason}
}

// The harness's watches give, per TaskAction, pod running → Executing (of
// the attempt running then), whether it ended without Executing, and the
// writes it saw (pods, status and metadata updates, by outcome); a resync
// is no write, and the floor gets no Executing numbers.
func TestObserverExecuting(t *testing.T) {
	var c clock
	ob := newObserver(4)
	ob.now = c.now
	c.at(0)
	for _, n := range []string{"a", "b", "c", "d"} {
		ob.get(n).created = c.now()
		ob.onTA(nil, benchTA(n, "1", []string{"fin"}))
	}
	progressing := func(reason string) metav1.Condition { return cond(flytev1.ConditionProgressing, reason) }
	ended := func(typ, reason string) metav1.Condition { return cond(typ, reason) }
	steps := []struct {
		ms int
		do func()
	}{
		// a: runs at 1000, Executing seen at 1250 (a resync after it is no write), succeeds.
		{10, func() { ob.onPod(benchPod("a-1", "a", corev1.PodPending)) }},
		{1000, func() { ob.onPod(benchPod("a-1", "a", corev1.PodRunning)) }},
		{1250, func() {
			ob.onTA(benchTA("a", "1", []string{"fin"}), benchTA("a", "2", []string{"fin"}, progressing(flytev1.ReasonExecuting)))
		}},
		{1300, func() {
			ob.onTA(benchTA("a", "2", []string{"fin"}, progressing(flytev1.ReasonExecuting)), benchTA("a", "2", []string{"fin"}, progressing(flytev1.ReasonExecuting)))
		}},
		{3000, func() { ob.onPod(benchPod("a-1", "a", corev1.PodSucceeded)) }},
		{3010, func() {
			ob.onTA(benchTA("a", "2", []string{"fin"}), benchTA("a", "3", []string{"fin"}, ended(flytev1.ConditionSucceeded, flytev1.ReasonCompleted)))
		}},
		// b: no finalizer from admission (a metadata patch), Queued, fails
		// without ever showing Executing.
		{1000, func() { ob.onPod(benchPod("b-1", "b", corev1.PodRunning)) }},
		{1100, func() { ob.onTA(benchTA("b", "1", nil), benchTA("b", "2", []string{"fin"})) }},
		{1200, func() {
			ob.onTA(benchTA("b", "2", []string{"fin"}), benchTA("b", "3", []string{"fin"}, progressing(flytev1.ReasonQueued)))
		}},
		{3000, func() { ob.onPod(benchPod("b-1", "b", corev1.PodFailed)) }},
		{3100, func() {
			ob.onTA(benchTA("b", "3", []string{"fin"}), benchTA("b", "4", []string{"fin"}, ended(flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)))
		}},
		// c: Executing arrives before the pod's Running on the harness's
		// watches: 0 ms, counted apart.
		{900, func() {
			ob.onTA(benchTA("c", "1", []string{"fin"}), benchTA("c", "2", []string{"fin"}, progressing(flytev1.ReasonExecuting)))
		}},
		{950, func() { ob.onPod(benchPod("c-1", "c", corev1.PodRunning)) }},
		{3000, func() {
			ob.onTA(benchTA("c", "2", []string{"fin"}), benchTA("c", "3", []string{"fin"}, ended(flytev1.ConditionSucceeded, flytev1.ReasonCompleted)))
		}},
		// d: attempt 1 runs and fails without Executing; attempt 2 runs at
		// 5000 and shows Executing at 5200: 200 ms, from attempt 2's start.
		{1000, func() { ob.onPod(benchPod("d-1", "d", corev1.PodRunning)) }},
		{3000, func() { ob.onPod(benchPod("d-1", "d", corev1.PodFailed)) }},
		{5000, func() { ob.onPod(benchPod("d-2", "d", corev1.PodRunning)) }},
		{5200, func() {
			ob.onTA(benchTA("d", "1", []string{"fin"}), benchTA("d", "2", []string{"fin"}, progressing(flytev1.ReasonExecuting)))
		}},
		{7000, func() { ob.onPod(benchPod("d-2", "d", corev1.PodSucceeded)) }},
		{7010, func() {
			ob.onTA(benchTA("d", "2", []string{"fin"}), benchTA("d", "3", []string{"fin"}, ended(flytev1.ConditionSucceeded, flytev1.ReasonCompleted)))
		}},
	}
	for _, st := range steps {
		c.at(st.ms)
		st.do()
	}
	select {
	case <-ob.allDone:
	default:
		t.Fatalf("%d TaskActions not ended", ob.left)
	}
	start := time.Unix(1_000_000, 0)
	res := &ModeResult{Mode: "executor", N: 4}
	res.fill(options{N: 4}, ob, start, start)
	want := &ExecutingStats{PodRunningToExecutingMS: Percentiles{Count: 3, P50: 200, P90: 250, P99: 250, Max: 250}, EndedWithoutExecuting: 1, SeenBeforePodRunning: 1}
	if !reflect.DeepEqual(res.Executing, want) {
		t.Errorf("executing %+v, want %+v", res.Executing, want)
	}
	// a, c: 1 pod + 2 status updates; d: 2 pods + 2 status updates.
	if w := res.SeenWritesSucceeded; w == nil || *w != (SeenWrites{TaskActions: 3, PodsCreated: 1.333, StatusUpdates: 2, MetadataUpdates: 0, Writes: 3.333}) {
		t.Errorf("succeeded: %+v", w)
	}
	// b: 1 pod, the finalizer patch, Queued and the end.
	if w := res.SeenWritesFailed; w == nil || *w != (SeenWrites{TaskActions: 1, PodsCreated: 1, StatusUpdates: 2, MetadataUpdates: 1, Writes: 4}) {
		t.Errorf("failed: %+v", w)
	}
	if res.Succeeded != 3 || res.Failed != 1 || res.Attempts != 5 {
		t.Errorf("succeeded %d, failed %d, attempts %d", res.Succeeded, res.Failed, res.Attempts)
	}
	floor := &ModeResult{Mode: "floor", N: 4}
	floor.fill(options{N: 4}, ob, start, start)
	if floor.Executing != nil {
		t.Errorf("the floor writes no Executing, yet %+v", floor.Executing)
	}
}
