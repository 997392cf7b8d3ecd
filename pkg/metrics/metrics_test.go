package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/setup"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.Level(2)))) // errors only
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// samples is one scrape: "name{k="v",...}" (labels sorted) to value; a
// histogram gives name_count and name_sum.
type samples map[string]float64

// scrape reads the registry over HTTP the way the manager's metrics server
// serves it (HTTPErrorOnError: a failing collector fails the scrape).
func scrape(t *testing.T) samples {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: HTTP %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	s := samples{}
	for name, mf := range mfs {
		for _, m := range mf.Metric {
			l := labelString(m)
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s[name+l] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s[name+l] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				s[name+"_count"+l] = float64(m.GetHistogram().GetSampleCount())
				s[name+"_sum"+l] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return s
}

func labelString(m *dto.Metric) string {
	if len(m.Label) == 0 {
		return ""
	}
	var parts []string
	for _, lp := range m.Label {
		parts = append(parts, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// wantDelta checks that each series grew by the given amount between two scrapes.
func wantDelta(t *testing.T, before, after samples, want map[string]float64) {
	t.Helper()
	for k, d := range want {
		if _, ok := after[k]; !ok && d != 0 {
			t.Errorf("%s: not in the scrape", k)
			continue
		}
		if got := after[k] - before[k]; got < d-1e-9 || got > d+1e-9 {
			t.Errorf("%s grew by %v, want %v", k, got, d)
		}
	}
}

func TestRecordingFunctionsShowInTheScrape(t *testing.T) {
	before := scrape(t)
	metrics.Transition("Executing", metrics.OutcomeOK)
	metrics.Transition("Executing", metrics.OutcomeOK)
	metrics.Transition("Completed", metrics.OutcomeError)
	for range 3 {
		metrics.Attempt()
	}
	metrics.Retry()
	metrics.QuotaRefusal()
	metrics.QuotaRefusal()
	metrics.SystemFailure("ResourceDeletedExternally")
	metrics.SystemFailure("ResourceDeletedExternally")
	metrics.ObserveLaunchLatency(1500 * time.Millisecond)
	metrics.ObserveLaunchLatency(-time.Second) // a clock step: counted as 0
	metrics.ObserveTerminalLatency(250 * time.Millisecond)
	metrics.EventBatch(3, 20*time.Millisecond, nil)
	metrics.EventBatch(5, 2*time.Second, errors.New("unavailable"))
	metrics.CacheLookup(flytev1.CacheHit.String())
	metrics.CacheLookup("miss")
	metrics.CacheLookup(flytev1.CacheLookupFailure.String())
	metrics.GCDeletion(metrics.GCDeleted)
	metrics.GCDeletion(metrics.GCDeleted)
	metrics.GCDeletion(metrics.GCRecreated)
	metrics.GCDeletion(metrics.GCFailed)
	metrics.ObserveGCSweep(2*time.Second, nil)
	metrics.ObserveGCSweep(time.Second, errors.New("list failed"))
	after := scrape(t)

	wantDelta(t, before, after, map[string]float64{
		`executor_taskaction_transitions_total{outcome="ok",phase="Executing"}`:       2,
		`executor_taskaction_transitions_total{outcome="error",phase="Completed"}`:    1,
		`executor_taskaction_attempts_total`:                                          3,
		`executor_taskaction_retries_total`:                                           1,
		`executor_taskaction_quota_refusals_total`:                                    2,
		`executor_taskaction_system_failures_total{code="ResourceDeletedExternally"}`: 2,
		`executor_taskaction_launch_latency_seconds_count`:                            2,
		`executor_taskaction_launch_latency_seconds_sum`:                              1.5,
		`executor_taskaction_terminal_latency_seconds_count`:                          1,
		`executor_taskaction_terminal_latency_seconds_sum`:                            0.25,
		`executor_event_batch_events_count`:                                           2,
		`executor_event_batch_events_sum`:                                             8,
		`executor_event_batch_duration_seconds_count`:                                 2,
		`executor_event_batch_duration_seconds_sum`:                                   2.02,
		`executor_event_batch_failures_total`:                                         1,
		`executor_cache_lookups_total{result="hit"}`:                                  1,
		`executor_cache_lookups_total{result="miss"}`:                                 1,
		`executor_cache_lookups_total{result="lookup_failure"}`:                       1,
		`executor_gc_deletions_total{outcome="deleted"}`:                              2,
		`executor_gc_deletions_total{outcome="recreated"}`:                            1,
		`executor_gc_deletions_total{outcome="failed"}`:                               1,
		`executor_gc_sweep_duration_seconds_count{result="success"}`:                  1,
		`executor_gc_sweep_duration_seconds_sum{result="success"}`:                    2,
		`executor_gc_sweep_duration_seconds_count{result="error"}`:                    1,
		`executor_taskaction_transitions_total{outcome="ok",phase="Completed"}`:       0,
		`executor_cache_lookups_total{result="HIT"}`:                                  0, // lower-cased
		`executor_gc_deletions_total{outcome="already_gone"}`:                         0,
		`executor_gc_sweep_duration_seconds_sum{result="error"}`:                      1,
	})
}

// taskAction is a TaskAction in ns with the given conditions (none: not reconciled yet).
func taskAction(ns, name string, conds ...metav1.Condition) *flytev1.TaskAction {
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flytev1.TaskActionSpec{RunName: "run", Project: "p", Domain: "d", ActionName: name,
			Template: &flytev1.TypedTaskTemplate{Container: &flytev1.Container{Image: "busybox"}}},
		Status: flytev1.TaskActionStatus{Conditions: conds},
	}
}

func cond(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
}

func TestPhaseGaugeAndAPIRequests(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The informer cache the gauge counts from, as the manager's would be.
	c, err := cache.New(env.Config, cache.Options{Scheme: setup.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	if err := metrics.RegisterPhaseGauge(c); err != nil {
		t.Fatal(err)
	}
	if err := metrics.RegisterPhaseGauge(c); err != nil { // a second manager in the same process
		t.Fatalf("registering again: %v", err)
	}

	// The test's writes go through an instrumented client.
	cfg := rest.CopyConfig(env.Config)
	metrics.InstrumentRESTConfig(cfg)
	k8s, err := client.NewWithWatch(cfg, client.Options{Scheme: setup.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	// Resolve the REST mapping before counting: discovery is not what is measured.
	if err := k8s.List(ctx, &flytev1.TaskActionList{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	before := scrape(t)

	// A watch lasts as long as it is open: it is not counted.
	w, err := k8s.Watch(ctx, &flytev1.TaskActionList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	objs := []*flytev1.TaskAction{
		taskAction(ns, "queued-1", cond(flytev1.ConditionProgressing, metav1.ConditionTrue, flytev1.ReasonQueued)),
		taskAction(ns, "queued-2", cond(flytev1.ConditionProgressing, metav1.ConditionTrue, flytev1.ReasonQueued)),
		taskAction(ns, "executing", cond(flytev1.ConditionProgressing, metav1.ConditionTrue, flytev1.ReasonExecuting)),
		taskAction(ns, "completed",
			cond(flytev1.ConditionProgressing, metav1.ConditionFalse, flytev1.ReasonCompleted),
			cond(flytev1.ConditionSucceeded, metav1.ConditionTrue, flytev1.ReasonCompleted)),
		taskAction(ns, "timed-out",
			cond(flytev1.ConditionProgressing, metav1.ConditionFalse, flytev1.ReasonExecuting),
			cond(flytev1.ConditionFailed, metav1.ConditionTrue, flytev1.ReasonTimedOut)),
		taskAction(ns, "new"),
	}
	statusWrites := 0
	for _, ta := range objs {
		st := ta.Status
		if err := k8s.Create(ctx, ta); err != nil {
			t.Fatal(err)
		}
		if len(st.Conditions) > 0 {
			ta.Status = st
			if err := k8s.Status().Update(ctx, ta); err != nil {
				t.Fatal(err)
			}
			statusWrites++
		}
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(objs[0]), &flytev1.TaskAction{}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(ctx, &flytev1.TaskActionList{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, objs[1]); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(objs[1]), &flytev1.TaskAction{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}

	// A request that gets no response at all.
	dead := rest.CopyConfig(cfg)
	dead.Host = "https://" + closedAddr(t)
	hc, err := rest.HTTPClientFor(dead)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := hc.Get(dead.Host + "/api/v1/namespaces/ns/pods"); err == nil {
		_ = resp.Body.Close()
		t.Fatal("request to a closed port succeeded")
	}

	// The cache catches up with the writes in its own time.
	want := map[string]float64{
		`executor_taskactions{phase="Queued"}`:    1,
		`executor_taskactions{phase="Executing"}`: 1,
		`executor_taskactions{phase="Completed"}`: 1,
		`executor_taskactions{phase="TimedOut"}`:  1,
		`executor_taskactions{phase="Unknown"}`:   1,
	}
	var after samples
	deadline := time.Now().Add(10 * time.Second)
	for {
		after = scrape(t)
		if gaugesMatch(after, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("executor_taskactions never reached %v; last scrape: %v", want, pick(after, "executor_taskactions{"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(pick(after, "executor_taskactions{")); n != len(want) {
		t.Errorf("executor_taskactions has %d series, want %d: %v", n, len(want), pick(after, "executor_taskactions{"))
	}

	const ta = "taskactions.flyte.org"
	wantDelta(t, before, after, map[string]float64{
		`executor_api_requests_total{code="201",resource="` + ta + `",verb="create"}`:        float64(len(objs)),
		`executor_api_requests_total{code="200",resource="` + ta + `/status",verb="update"}`: float64(statusWrites),
		`executor_api_requests_total{code="200",resource="` + ta + `",verb="get"}`:           1,
		`executor_api_requests_total{code="404",resource="` + ta + `",verb="get"}`:           1,
		`executor_api_requests_total{code="200",resource="` + ta + `",verb="list"}`:          1,
		`executor_api_requests_total{code="200",resource="` + ta + `",verb="delete"}`:        1,
		`executor_api_requests_total{code="error",resource="pods",verb="list"}`:              1,
		`executor_api_request_duration_seconds_count{resource="` + ta + `",verb="create"}`:   float64(len(objs)),
		`executor_api_request_duration_seconds_count{resource="` + ta + `",verb="get"}`:      2,
		`executor_api_request_duration_seconds_count{resource="pods",verb="list"}`:           1,
	})
	for k := range after {
		if strings.Contains(k, `verb="watch"`) {
			t.Errorf("a watch was counted: %s", k)
		}
	}
	for k, v := range pick(after, "executor_api_request_duration_seconds_sum{") {
		if v < before[k] {
			t.Errorf("%s went down", k)
		}
	}

	// A reader that fails costs the gauge for that scrape, not the scrape.
	if err := metrics.RegisterPhaseGauge(failingReader{}); err != nil {
		t.Fatal(err)
	}
	if s := scrape(t); len(pick(s, "executor_taskactions{")) != 0 {
		t.Errorf("executor_taskactions reported from a failing reader: %v", pick(s, "executor_taskactions{"))
	}
	if err := metrics.RegisterPhaseGauge(c); err != nil {
		t.Fatal(err)
	}
	if s := scrape(t); s[`executor_taskactions{phase="Completed"}`] != 1 {
		t.Errorf("after switching back to the cache: %v", pick(s, "executor_taskactions{"))
	}
}

func gaugesMatch(s samples, want map[string]float64) bool {
	for k, v := range want {
		if s[k] != v {
			return false
		}
	}
	return true
}

func pick(s samples, prefix string) samples {
	out := samples{}
	for k, v := range s {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// closedAddr is a local address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("cache is gone")
}

// TestUserTextAddsNoSeries: the error code of a task's error.pb is the task's
// own text (a SYSTEM error there is counted as a system failure), and whoever
// may write a TaskAction's status chooses its condition reasons. Neither may
// add series: an unknown value is counted under "other".
func TestUserTextAddsNoSeries(t *testing.T) {
	const n = 50
	before := scrape(t)
	for i := range n {
		metrics.SystemFailure(fmt.Sprintf("user-code-%d", i))
		metrics.Transition(fmt.Sprintf("MadeUp%d", i), metrics.OutcomeOK)
	}
	metrics.SystemFailure("Evicted")
	after := scrape(t)

	for _, name := range []string{"executor_taskaction_system_failures_total", "executor_taskaction_transitions_total"} {
		var added []string
		for k := range after {
			if _, ok := before[k]; !ok && strings.HasPrefix(k, name+"{") {
				added = append(added, k)
			}
		}
		if len(added) > 2 {
			t.Errorf("%d new %s series from arbitrary text: %v", len(added), name, added)
		}
		for _, k := range added {
			if strings.Contains(k, "user-code-") || strings.Contains(k, "MadeUp") {
				t.Errorf("series named by arbitrary text: %s", k)
			}
		}
	}
	wantDelta(t, before, after, map[string]float64{
		`executor_taskaction_system_failures_total{code="other"}`:             n,
		`executor_taskaction_system_failures_total{code="Evicted"}`:           1,
		`executor_taskaction_transitions_total{outcome="ok",phase="other"}`:   n,
		`executor_taskaction_system_failures_total{code="user-code-0"}`:       0,
		`executor_taskaction_transitions_total{outcome="ok",phase="MadeUp0"}`: 0,
	})

	for _, tc := range []struct{ reason, want string }{
		{flytev1.ReasonCompleted, flytev1.ReasonCompleted},
		{"SomeoneElsesReason", metrics.LabelOther},
	} {
		ta := taskAction("ns", "x", cond(flytev1.ConditionSucceeded, metav1.ConditionTrue, tc.reason))
		if got := metrics.Phase(ta); got != tc.want {
			t.Errorf("Phase with Succeeded reason %q = %q, want %q", tc.reason, got, tc.want)
		}
		ta = taskAction("ns", "y", cond(flytev1.ConditionProgressing, metav1.ConditionTrue, tc.reason))
		if got := metrics.Phase(ta); got != tc.want {
			t.Errorf("Phase with Progressing reason %q = %q, want %q", tc.reason, got, tc.want)
		}
	}
}

// The system-failure codes the pod plugin and the reconciler produce keep
// their names in the metric.
func TestKnownSystemFailureCodes(t *testing.T) {
	for _, code := range []string{container.CodeEvicted, container.CodeInterrupted, plugin.CodeUnknownError,
		plugin.CodeResourceDeletedExternally, "SystemError", "StorageError", "NodeLost", "OutOfcpu"} {
		if !slices.Contains(metrics.SystemFailureCodes, code) {
			t.Errorf("%s is not a known system-failure code", code)
		}
	}
}
