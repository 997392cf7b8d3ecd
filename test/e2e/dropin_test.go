package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/cachesvc/cachesvctest"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
	"github.com/taskaction/executor/pkg/local"
	"github.com/taskaction/executor/pkg/storage"
)

// TestExecutingShownWhileAFlyteTaskRuns: with the default status delays, a
// Flyte-form task whose pod runs (here until the test sees Executing) shows
// Executing, with its attempt counted, while it runs: Flyte's control plane
// shows an action as running only from the TaskAction's conditions. The
// executor writes it at once, or, while it is short of capacity, at most
// executingStatusDelay after the pod started; the wait below allows that
// bound and as much again for a loaded machine's reconcile.
func TestExecutingShownWhileAFlyteTaskRuns(t *testing.T) {
	ev := eventsvctest.Start(t, eventsvctest.Options{})
	ns := namespace(t)
	d := config.Default()
	startExecutorWith(t, ns, ev.URL, "", func(c *config.Config) {
		c.QueuedStatusDelay, c.SaturatedStatusDelay, c.ExecutingStatusDelay = d.QueuedStatusDelay, d.SaturatedStatusDelay, d.ExecutingStatusDelay
	})
	ta := flyteAction(t, ns, "rexec", "a0", nil, 0)
	create(t, ta)
	pod := waitPod(t, ns, ta.Name+"-0")
	kubelet(t, pod, corev1.PodRunning, 0)
	started := time.Now()
	eventually(t, 2*d.ExecutingStatusDelay.Duration+30*time.Second, "Executing while the pod runs", func() bool {
		c := meta.FindStatusCondition(get(t, ns, ta.Name).Status.Conditions, flytev1.ConditionProgressing)
		return c != nil && c.Reason == flytev1.ReasonExecuting
	})
	t.Logf("pod running → TaskAction Executing: %v (bound %v while saturated, else at once)", time.Since(started).Round(time.Millisecond), d.ExecutingStatusDelay.Duration)
	if got := get(t, ns, ta.Name); got.Status.Attempts != 1 || meta.IsStatusConditionTrue(got.Status.Conditions, flytev1.ConditionSucceeded) {
		t.Fatalf("while the pod runs: attempts %d, conditions %+v", got.Status.Attempts, got.Status.Conditions)
	}
	kubelet(t, waitPod(t, ns, ta.Name+"-0"), corev1.PodSucceeded, 0)
	waitReason(t, ns, ta.Name, flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
}

// TestAnotherWritersStatusIsNotTheExecutors: Flyte's actions service writes
// the whole status (Status().Update) with its own attempts and cacheStatus
// (here 3 and 6, SKIPPED) while a cached Flyte-form task runs. The executor
// reports its own observation (attempt 1, CACHE_POPULATED), and its next
// status write puts its own values back.
func TestAnotherWritersStatusIsNotTheExecutors(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.New(local.StorageConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	ev := eventsvctest.Start(t, eventsvctest.Options{})
	cs := cachesvctest.Start(t, cachesvctest.Options{})
	ns := namespace(t)
	startExecutorWith(t, ns, ev.URL, cs.URL, func(c *config.Config) { c.Storage = local.StorageConfig(dir) })
	two := int64(2)
	ta := storedInputs(t, st, local.BucketURI(dir), ns, "rother", "a1", &two)
	create(t, ta)
	pod := waitPod(t, ns, ta.Name+"-0")
	if got := waitReason(t, ns, ta.Name, flytev1.ConditionProgressing, flytev1.ReasonQueued); got.Status.CacheStatus != flytev1.CacheMiss {
		t.Fatalf("cacheStatus %s, want MISS", got.Status.CacheStatus)
	}
	actionsServiceUpdate(t, ns, ta.Name, 3, int64(flytev1.CacheSkipped))
	if got := get(t, ns, ta.Name); got.Status.CacheStatus != flytev1.CacheSkipped || got.Status.Attempts != 3 {
		t.Fatalf("the other writer's update did not land: %+v", got.Status)
	}
	kubelet(t, pod, corev1.PodSucceeded, 0)
	got := waitReason(t, ns, ta.Name, flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.CacheStatus != flytev1.CachePopulated || got.Status.Attempts != 1 {
		t.Errorf("ended: cacheStatus %s, attempts %d; want the executor's own: POPULATED, 1", got.Status.CacheStatus, got.Status.Attempts)
	}
	evs, phases := stored(t, ev.Store, "rother", "a1")
	last := evs[len(evs)-1]
	if last.Phase != events.PhaseSucceeded || last.Attempt != 1 || last.CacheStatus != flytev1.CachePopulated.String() {
		t.Errorf("events %s; the last: attempt %d, %s, cache %s; want attempt 1 SUCCEEDED with %s", phases, last.Attempt, last.Phase, last.CacheStatus, flytev1.CachePopulated)
	}
}

// actionsServiceUpdate writes attempts and cacheStatus as Flyte's actions
// service does (ActionsService.Update → PutStatus): read the object, set the
// two fields, write the whole status back.
func actionsServiceUpdate(t *testing.T, ns, name string, attempts, cacheStatus int64) {
	t.Helper()
	ctx := context.Background()
	for try := 0; try < 10; try++ {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(flytev1.GroupVersion.WithKind("TaskAction"))
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			t.Fatal(err)
		}
		st, _ := u.Object["status"].(map[string]any)
		if st == nil {
			st = map[string]any{}
		}
		st["attempts"], st["cacheStatus"] = attempts, cacheStatus
		u.Object["status"] = st
		if err := k8s.Status().Update(ctx, u); err == nil {
			return
		}
	}
	raw, _ := json.Marshal(get(t, ns, name).Status)
	t.Fatalf("the actions service's update kept failing; status %s", raw)
}
