package gc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/gc"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/setup"
)

var (
	env *testenv.Env
	k8s client.Client // the test's own, uninstrumented
	// gcClient is the collector's client: it reads from gcCache, as the
	// collector reads the manager's cache, and its requests are counted in
	// executor_api_requests_total, so tests can tell what the collector sent.
	gcClient client.Client
	gcCache  cache.Cache
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.Level(zapLevel()))))
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	cfg := rest.CopyConfig(env.Config)
	metrics.InstrumentRESTConfig(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	if err = startCache(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		cancel()
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	cancel()
	_ = env.Stop()
	os.Exit(code)
}

func startCache(ctx context.Context, cfg *rest.Config) error {
	var err error
	if gcCache, err = cache.New(cfg, cache.Options{Scheme: setup.Scheme()}); err != nil {
		return err
	}
	if err = gcCache.IndexField(ctx, &flytev1.TaskAction{}, gc.TerminalIndex, gc.IndexTerminal); err != nil {
		return err
	}
	go func() { _ = gcCache.Start(ctx) }()
	if !gcCache.WaitForCacheSync(ctx) {
		return errors.New("the collector's cache did not sync")
	}
	gcClient, err = client.New(cfg, client.Options{Scheme: setup.Scheme(), Cache: &client.CacheOptions{Reader: gcCache}})
	return err
}

func zapLevel() int8 {
	if os.Getenv("TEST_VERBOSE") != "" {
		return -2
	}
	return 2 // errors only
}

const ttl = time.Hour

// namespace creates a namespace of its own for t and empties it of
// TaskActions when t ends, so that each test's sweep sees only its own.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k8s.DeleteAllOf(context.Background(), &flytev1.TaskAction{}, client.InNamespace(ns.Name)); err != nil {
			t.Errorf("clean up: %v", err)
		}
	})
	return ns.Name
}

type state int

const (
	running   state = iota // Progressing, not terminal
	succeeded              // Succeeded=True
	failed                 // Failed=True
)

// object describes one TaskAction to create.
type object struct {
	name        string
	state       state
	completedAt *time.Time        // when the end was recorded (the terminal condition's time), if set
	labels      map[string]string // on top of nothing: terminal ones need them given
}

func terminatedLabels(completed time.Time) map[string]string {
	return map[string]string{
		flytev1.TerminationStatusLabel: flytev1.TerminationStatusValue,
		flytev1.CompletedTimeLabel:     completed.UTC().Format(flytev1.CompletedTimeLabelFormat),
	}
}

// expired is a terminal TaskAction that ended at ago before now, labelled the
// way the reconciler labels it.
func expired(name string, now time.Time, ago time.Duration) object {
	at := now.Add(-ago)
	return object{name: name, state: succeeded, completedAt: &at, labels: terminatedLabels(at)}
}

// create makes o in ns and writes its status, as the reconciler would.
func create(t *testing.T, ns string, o object) *flytev1.TaskAction {
	t.Helper()
	ctx := context.Background()
	ta := &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: o.name, Labels: o.labels},
		Spec: flytev1.TaskActionSpec{RunName: "run", Project: "p", Domain: "d", ActionName: o.name, TaskType: "container",
			Template: &flytev1.TypedTaskTemplate{Container: &flytev1.Container{Image: "busybox"}}},
	}
	if err := k8s.Create(ctx, ta); err != nil {
		t.Fatalf("create %s: %v", o.name, err)
	}
	lt := metav1.NewTime(time.Now().Truncate(time.Second))
	if o.completedAt != nil {
		lt = metav1.NewTime(*o.completedAt)
	} else if at, err := time.Parse(flytev1.CompletedTimeLabelFormat, o.labels[flytev1.CompletedTimeLabel]); err == nil {
		lt = metav1.NewTime(at) // the reconciler writes both at once
	}
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: lt}
	}
	switch o.state {
	case running:
		ta.Status.Conditions = []metav1.Condition{cond(flytev1.ConditionProgressing, metav1.ConditionTrue, flytev1.ReasonExecuting)}
	case succeeded:
		ta.Status.Conditions = []metav1.Condition{
			cond(flytev1.ConditionProgressing, metav1.ConditionFalse, flytev1.ReasonCompleted),
			cond(flytev1.ConditionSucceeded, metav1.ConditionTrue, flytev1.ReasonCompleted),
		}
	case failed:
		ta.Status.Conditions = []metav1.Condition{
			cond(flytev1.ConditionProgressing, metav1.ConditionFalse, flytev1.ReasonPermanentFailure),
			cond(flytev1.ConditionFailed, metav1.ConditionTrue, flytev1.ReasonPermanentFailure),
		}
	}
	if err := k8s.Status().Update(ctx, ta); err != nil {
		t.Fatalf("status of %s: %v", o.name, err)
	}
	// The collector reads the cache: wait until it has seen the object as written.
	waitFor(t, "the cache to see "+o.name, func() bool {
		got := &flytev1.TaskAction{}
		return gcCache.Get(ctx, client.ObjectKeyFromObject(ta), got) == nil && got.ResourceVersion == ta.ResourceVersion
	})
	return ta
}

// exists tells whether ns/name holds an object, and its UID.
func exists(t *testing.T, ns, name string) (bool, types.UID) {
	t.Helper()
	ta := &flytev1.TaskAction{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ta)
	if apierrors.IsNotFound(err) {
		return false, ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return true, ta.UID
}

func wantGone(t *testing.T, ns string, names ...string) {
	t.Helper()
	for _, n := range names {
		if ok, _ := exists(t, ns, n); ok {
			t.Errorf("%s still exists, want it deleted", n)
		}
	}
}

func wantKept(t *testing.T, ns string, names ...string) {
	t.Helper()
	for _, n := range names {
		if ok, _ := exists(t, ns, n); !ok {
			t.Errorf("%s was deleted, want it kept", n)
		}
	}
}

// newGC is a collector at the fixed time now of clk.
func newGC(clk *clocktesting.FakeClock) *gc.GC {
	return &gc.GC{Reader: gcClient, Writer: gcClient, Interval: time.Hour, MaxTTL: ttl, Clock: clk}
}

// counter reads one counter of the metrics registry; 0 when it has no sample yet.
func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if matches(m, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, lp := range m.Label {
		if v, ok := labels[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

func TestSweepDeletesExpiredKeepsFreshAndNonTerminal(t *testing.T) {
	ns := namespace(t)
	now := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakeClock(now)
	old := now.Add(-10 * ttl)

	create(t, ns, expired("old-succeeded", now, ttl+time.Second))
	f := expired("old-failed", now, 3*ttl)
	f.state = failed
	create(t, ns, f)
	create(t, ns, expired("fresh", now, ttl-5*time.Second))
	// Terminal by its status, labelled by hand with an old label only: the
	// minute-precision fallback applies.
	create(t, ns, object{name: "label-only-old", state: succeeded, labels: terminatedLabels(old)})
	create(t, ns, object{name: "label-only-fresh", state: succeeded, labels: terminatedLabels(now)})
	create(t, ns, object{name: "bad-label", state: succeeded, labels: map[string]string{
		flytev1.TerminationStatusLabel: flytev1.TerminationStatusValue, flytev1.CompletedTimeLabel: "not-a-time"}})
	// Not terminal, whatever the labels say.
	create(t, ns, object{name: "running-labelled", state: running, labels: terminatedLabels(old)})
	create(t, ns, object{name: "no-status-labelled", state: -1, labels: terminatedLabels(old)})
	// Expired by its status, with no label: the status decides.
	create(t, ns, object{name: "unlabelled", state: succeeded, completedAt: &old})

	deletes := counter(t, "executor_api_requests_total", map[string]string{"verb": "delete", "resource": "taskactions.flyte.org", "code": "200"})
	deleted := counter(t, "executor_gc_deletions_total", map[string]string{"outcome": metrics.GCDeleted})
	res, err := newGC(clk).Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The ones not terminal are not even listed.
	want := gc.Result{Listed: 7, Deleted: 4, Kept: 3}
	if res != want {
		t.Errorf("sweep = %+v, want %+v", res, want)
	}
	wantGone(t, ns, "old-succeeded", "old-failed", "label-only-old", "unlabelled")
	wantKept(t, ns, "fresh", "label-only-fresh", "bad-label", "running-labelled", "no-status-labelled")

	// One DELETE per deleted TaskAction and nothing else written.
	if d := counter(t, "executor_api_requests_total", map[string]string{"verb": "delete", "resource": "taskactions.flyte.org", "code": "200"}) - deletes; d != 4 {
		t.Errorf("collector sent %v DELETEs, want 4", d)
	}
	for _, verb := range []string{"patch", "update", "get"} {
		if n := counter(t, "executor_api_requests_total", map[string]string{"verb": verb, "resource": "taskactions.flyte.org"}); n != 0 {
			t.Errorf("collector sent %v %s requests, want none", n, verb)
		}
	}
	if d := counter(t, "executor_gc_deletions_total", map[string]string{"outcome": metrics.GCDeleted}) - deleted; d != 4 {
		t.Errorf("executor_gc_deletions_total{outcome=deleted} grew by %v, want 4", d)
	}

	// The fresh one goes once its TTL has passed, the label-only one a minute
	// after its label's minute (its real end may be anywhere in that minute).
	clk.Step(10 * time.Second)
	if _, err := newGC(clk).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantGone(t, ns, "fresh")
	wantKept(t, ns, "label-only-fresh", "running-labelled", "no-status-labelled")
	clk.Step(ttl + time.Minute)
	if _, err := newGC(clk).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The recorded end (the terminal condition's time) decides, whatever a
	// hand-written label says.
	wantGone(t, ns, "label-only-fresh", "bad-label")
	wantKept(t, ns, "running-labelled", "no-status-labelled")
}

func TestRecreatedUnderSameNameSurvives(t *testing.T) {
	ns := namespace(t)
	now := time.Now().Truncate(time.Second)
	old := create(t, ns, expired("same-name", now, 2*ttl))
	g := newGC(clocktesting.NewFakeClock(now))
	var newUID types.UID
	// Between the collector's list and its DELETE the TaskAction is deleted
	// and a new one, itself expired, is created under the same name: only the
	// UID tells them apart.
	g.SetBeforeDelete(func(ctx context.Context, ta *flytev1.TaskAction) {
		if err := k8s.Delete(ctx, ta); err != nil {
			t.Errorf("delete: %v", err)
		}
		newUID = create(t, ns, expired("same-name", now, 2*ttl)).UID
	})
	recreated := counter(t, "executor_gc_deletions_total", map[string]string{"outcome": metrics.GCRecreated})
	res, err := g.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Recreated != 1 || res.Deleted != 0 || res.Failed != 0 {
		t.Errorf("sweep = %+v, want 1 recreated and nothing deleted or failed", res)
	}
	ok, uid := exists(t, ns, "same-name")
	if !ok || uid != newUID || uid == old.UID {
		t.Errorf("same-name: exists=%v uid=%s, want the new object %s (old %s)", ok, uid, newUID, old.UID)
	}
	if d := counter(t, "executor_gc_deletions_total", map[string]string{"outcome": metrics.GCRecreated}) - recreated; d != 1 {
		t.Errorf("executor_gc_deletions_total{outcome=recreated} grew by %v, want 1", d)
	}

	// The new object is expired too: the next sweep, which sees its UID, deletes it.
	g.SetBeforeDelete(nil)
	if res, err := g.Sweep(context.Background()); err != nil || res.Deleted != 1 {
		t.Fatalf("second sweep = %+v, %v; want 1 deleted", res, err)
	}
	wantGone(t, ns, "same-name")
}

func TestAlreadyGoneIsNotAFailure(t *testing.T) {
	ns := namespace(t)
	now := time.Now().Truncate(time.Second)
	create(t, ns, expired("gone", now, 2*ttl))
	g := newGC(clocktesting.NewFakeClock(now))
	g.SetBeforeDelete(func(ctx context.Context, ta *flytev1.TaskAction) {
		if err := k8s.Delete(ctx, ta); err != nil {
			t.Errorf("delete: %v", err)
		}
	})
	res, err := g.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.AlreadyGone != 1 || res.Failed != 0 {
		t.Errorf("sweep = %+v, want 1 already gone, 0 failed", res)
	}
}

// flakyWriter fails the deletes of one name while failing is set.
type flakyWriter struct {
	client.Writer
	name    string
	failing atomic.Bool
}

func (w *flakyWriter) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if w.failing.Load() && obj.GetName() == w.name {
		return apierrors.NewServiceUnavailable("etcd is having a bad day")
	}
	return w.Writer.Delete(ctx, obj, opts...)
}

func TestDeleteFailureDoesNotStopTheSweep(t *testing.T) {
	ns := namespace(t)
	now := time.Now().Truncate(time.Second)
	for _, n := range []string{"a", "b", "c"} {
		create(t, ns, expired(n, now, 2*ttl))
	}
	w := &flakyWriter{Writer: gcClient, name: "b"}
	w.failing.Store(true)
	g := newGC(clocktesting.NewFakeClock(now))
	g.Writer = w // b fails in the middle of the listing
	failedBefore := counter(t, "executor_gc_deletions_total", map[string]string{"outcome": metrics.GCFailed})
	res, err := g.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 2 || res.Failed != 1 {
		t.Errorf("sweep = %+v, want 2 deleted, 1 failed", res)
	}
	wantGone(t, ns, "a", "c")
	wantKept(t, ns, "b")
	if d := counter(t, "executor_gc_deletions_total", map[string]string{"outcome": metrics.GCFailed}) - failedBefore; d != 1 {
		t.Errorf("executor_gc_deletions_total{outcome=failed} grew by %v, want 1", d)
	}

	w.failing.Store(false)
	if res, err := g.Sweep(context.Background()); err != nil || res.Deleted != 1 {
		t.Fatalf("retry sweep = %+v, %v; want b deleted", res, err)
	}
	wantGone(t, ns, "b")
}

type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("no API server today")
}

func TestListFailureEndsTheSweep(t *testing.T) {
	g := newGC(clocktesting.NewFakeClock(time.Now()))
	g.Reader = failingReader{}
	if _, err := g.Sweep(context.Background()); err == nil {
		t.Fatal("sweep with a failing List returned no error")
	}
}

func TestStartSweepsAtOnceThenEveryInterval(t *testing.T) {
	ns := namespace(t)
	now := time.Now().Truncate(time.Second)
	clk := clocktesting.NewFakeClock(now)
	create(t, ns, expired("at-start", now, 2*ttl))
	create(t, ns, expired("later", now, ttl-time.Minute))

	g := newGC(clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Start(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start returned %v on stop, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Start did not return after its context was cancelled")
		}
	}()

	// The ticker exists only once the startup sweep is done.
	waitFor(t, "the startup sweep", clk.HasWaiters)
	wantGone(t, ns, "at-start")
	wantKept(t, ns, "later")

	// No tick before the interval: nothing more happens.
	clk.Step(g.Interval - time.Second)
	time.Sleep(200 * time.Millisecond)
	wantKept(t, ns, "later")

	clk.Step(time.Second) // the first tick; "later" is past its TTL now
	waitFor(t, "the sweep of the first tick", func() bool { ok, _ := exists(t, ns, "later"); return !ok })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNewAndAdd(t *testing.T) {
	disabled := config.GCConfig{Interval: config.Duration{}, MaxTTL: config.Duration{Duration: time.Hour}}
	if g, err := gc.New(gcClient, gcClient, disabled); g != nil || err != nil {
		t.Errorf("New(interval 0) = %v, %v; want nil, nil", g, err)
	}
	// A nil Manager inside: any use of it panics, so Add must not touch it.
	if err := gc.Add(&recordingManager{}, disabled); err != nil {
		t.Errorf("Add(interval 0) = %v, want nil", err)
	}

	bad := config.GCConfig{Interval: config.Duration{Duration: time.Minute}}
	if _, err := gc.New(gcClient, gcClient, bad); err == nil || err.Error() != "gc.maxTTL must be positive when gc is enabled" {
		t.Errorf("New(maxTTL 0) error = %v", err)
	}
	rm := &recordingManager{reader: gcClient, client: gcClient, indexer: &recordingIndexer{}}
	if err := gc.Add(rm, bad); err == nil || len(rm.added) != 0 {
		t.Errorf("Add(maxTTL 0) = %v with %d runnables added, want an error and none", err, len(rm.added))
	}

	on := config.GCConfig{Interval: config.Duration{Duration: time.Minute}, MaxTTL: config.Duration{Duration: 5 * time.Second}}
	if err := gc.Add(rm, on); err != nil {
		t.Fatal(err)
	}
	if len(rm.added) != 1 {
		t.Fatalf("Add added %d runnables, want 1", len(rm.added))
	}
	g, ok := rm.added[0].(*gc.GC)
	if !ok {
		t.Fatalf("Add added a %T, want *gc.GC", rm.added[0])
	}
	if !g.NeedLeaderElection() || g.Interval != time.Minute || g.MaxTTL != 5*time.Second || g.Reader != client.Reader(gcClient) {
		t.Errorf("added %+v, want a leader-elected GC with interval 1m, maxTTL 5s, reading through the manager's client", g)
	}
	if got := rm.indexer.fields; len(got) != 1 || got[0] != gc.TerminalIndex {
		t.Errorf("indexed %v, want the terminal index", got)
	}
}

// recordingManager records Add and serves the readers; everything else
// panics on the nil Manager.
type recordingManager struct {
	manager.Manager
	reader  client.Reader
	client  client.Client
	indexer *recordingIndexer
	added   []manager.Runnable
}

func (m *recordingManager) Add(r manager.Runnable) error { m.added = append(m.added, r); return nil }
func (m *recordingManager) GetAPIReader() client.Reader  { return m.reader }
func (m *recordingManager) GetClient() client.Client     { return m.client }
func (m *recordingManager) GetFieldIndexer() client.FieldIndexer {
	return m.indexer
}

type recordingIndexer struct{ fields []string }

func (r *recordingIndexer) IndexField(_ context.Context, _ client.Object, field string, _ client.IndexerFunc) error {
	r.fields = append(r.fields, field)
	return nil
}

// TestRunsUnderTheManager runs the collector as the issue configures it, in a
// leader-elected manager with the real clock: gc.maxTTL 5s means about 5s.
func TestRunsUnderTheManager(t *testing.T) {
	ns := namespace(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                        setup.Scheme(),
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "gc-test",
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.GCConfig{Interval: config.Duration{Duration: time.Second}, MaxTTL: config.Duration{Duration: 5 * time.Second}}
	if err := gc.Add(mgr, cfg); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	create(t, ns, expired("old", now, time.Hour))
	create(t, ns, expired("new", now, 0)) // completedAt is truncated to the second: ended at most 1s ago

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("manager did not stop")
		}
	}()

	select {
	case <-mgr.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("not elected")
	}
	waitFor(t, "old to be deleted by the startup sweep", func() bool { ok, _ := exists(t, ns, "old"); return !ok })
	if time.Until(now.Add(3*time.Second)) > 0 {
		time.Sleep(time.Until(now.Add(3 * time.Second)))
		wantKept(t, ns, "new")
	}
	waitFor(t, "new to be deleted about 5s after it ended", func() bool { ok, _ := exists(t, ns, "new"); return !ok })
	if el := time.Since(now); el < 4*time.Second || el > 8*time.Second {
		t.Errorf("new was deleted %v after it ended, want about 5s", el)
	}
}
