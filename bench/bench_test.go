package main

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/kwokrig"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/task"
)

func TestParseProm(t *testing.T) {
	in := `# HELP apiserver_request_total x
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",subresource="",verb="POST",version="v1"} 12
apiserver_request_total{code="200",group="flyte.org",resource="taskactions",subresource="status",verb="PATCH",version="v1"} 3
apiserver_request_total{code="200",group="flyte.org",resource="taskactions",subresource="status",verb="PATCH",version="v1",weird="a\"b,c=d"} 1
process_cpu_seconds_total 4.5
`
	ss := parseProm([]byte(in))
	got := counters(ss, "apiserver_request_total", apiserverKey)
	if got["POST pods 201"] != 12 || got["PATCH taskactions.flyte.org/status 200"] != 4 {
		t.Fatalf("counters: %v", got)
	}
	if v := value(ss, "process_cpu_seconds_total"); v != 4.5 {
		t.Fatalf("process_cpu_seconds_total = %v", v)
	}
	if ss[2].labels["weird"] != `a"b,c=d` {
		t.Fatalf("escaped label: %q", ss[2].labels["weird"])
	}
}

func TestWantFail(t *testing.T) {
	for _, tc := range []struct {
		n    int
		f    float64
		want int
	}{{2000, 0.1, 200}, {200, 0.1, 20}, {100, 0, 0}, {100, 1, 100}, {7, 0.5, 3}} {
		got := 0
		for i := range tc.n {
			if wantFail(i, tc.f) {
				got++
			}
		}
		if got != tc.want {
			t.Errorf("n=%d f=%v: %d failures, want %d", tc.n, tc.f, got, tc.want)
		}
	}
}

func TestPercentiles(t *testing.T) {
	var v []float64
	for i := 1; i <= 100; i++ {
		v = append(v, float64(i))
	}
	p := percentiles(v)
	if p.P50 != 50 || p.P90 != 90 || p.P99 != 99 || p.Max != 100 || p.Count != 100 {
		t.Fatalf("%+v", p)
	}
	if p := percentiles(nil); p.Count != 0 {
		t.Fatalf("%+v", p)
	}
}

func TestReportWrite(t *testing.T) {
	dir := t.TempDir()
	r := &Report{Params: Params{N: 3}, Modes: []*ModeResult{
		{Mode: "floor", N: 3, Succeeded: 3, Completions: []float64{1, 2, 3}, Controller: requestTable(map[string]float64{"create pods 201": 3}, 3)},
		{Mode: "executor", N: 3, Succeeded: 2, Failed: 1, Completions: []float64{1.5, 2.5, 4}},
	}}
	paths, err := r.Write(dir, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Fatal(paths)
	}
	md, _ := os.ReadFile(paths[1])
	if !strings.Contains(string(md), "executor ÷ floor") || !strings.Contains(string(md), "| create pods 201 | 3 | 1.000 |") {
		t.Fatalf("markdown:\n%s", md)
	}
	if st, err := os.Stat(filepath.Join(dir, filepath.Base(paths[2]))); err != nil || st.Size() == 0 {
		t.Fatalf("png: %v", err)
	}
	if math.Abs(r.Modes[0].Controller.TotalPerTA-1) > 1e-9 {
		t.Fatal(r.Modes[0].Controller.TotalPerTA)
	}
}

// --rounds: each round's executor is compared with that round's floor, in
// whichever order they ran; a round with a failed run has no ratio; the
// median is over the rounds, and the full table is the median round's.
func TestReportRounds(t *testing.T) {
	run := func(mode string, round int, perSecond, machineCPU float64) *ModeResult {
		return &ModeResult{Mode: mode, Round: round, N: 10, Succeeded: 10, TaskActionsPerSecond: perSecond, MachineCPUSeconds: machineCPU, Completions: []float64{1}}
	}
	r := &Report{Params: Params{N: 10, Rounds: 4}, Modes: []*ModeResult{
		run("floor", 1, 50, 1), run("executor", 1, 40, 1.25), // 0.80
		run("executor", 2, 30, 1), run("floor", 2, 60, 1), // 0.50
		run("floor", 3, 40, 1), run("executor", 3, 28, 1.5), // 0.70
		run("floor", 4, 40, 1), {Mode: "executor", Round: 4, Error: "timed out"},
	}}
	r.Rounds = roundResults(r.Modes)
	want := []RoundResult{
		{Round: 1, First: "floor", FloorPerSecond: 50, ExecutorPerSecond: 40, Ratio: 0.8, MachineCPURatio: 1.25},
		{Round: 2, First: "executor", FloorPerSecond: 60, ExecutorPerSecond: 30, Ratio: 0.5, MachineCPURatio: 1},
		{Round: 3, First: "floor", FloorPerSecond: 40, ExecutorPerSecond: 28, Ratio: 0.7, MachineCPURatio: 1.5},
	}
	if !reflect.DeepEqual(r.Rounds, want) {
		t.Fatalf("rounds %+v, want %+v", r.Rounds, want)
	}
	if round, median := medianRound(r.Rounds); round != 3 || median != 0.7 {
		t.Fatalf("median round %d ratio %v, want round 3 and 0.7", round, median)
	}
	if round, median := medianRound(want[:2]); round != 2 || median != 0.65 {
		t.Fatalf("median of two: round %d ratio %v, want the lower (round 2) and 0.65", round, median)
	}
	if m := r.mode("executor"); m == nil || m.Round != 3 {
		t.Fatalf("table's executor run %+v, want round 3's", m)
	}
	md := r.Markdown("x.png")
	for _, s := range []string{"**Median ratio 0.70**", "the table after this one is round 3's", "| 2 | executor | 60.0 | 30.0 | 0.50 | 1.00 |", "| **TaskActions/s to terminal** | 40.0 | 28.0 | 0.70 |"} {
		if !strings.Contains(md, s) {
			t.Fatalf("markdown lacks %q:\n%s", s, md)
		}
	}
}

// The deletion phase and the per-TaskAction CPU get their rows; a controller
// that does not serve the rate limiter's metric shows n/a, not 0.
func TestReportDeletionRows(t *testing.T) {
	r := &Report{Params: Params{N: 4, GC: true}, Modes: []*ModeResult{
		{Mode: "floor", N: 4, Succeeded: 4, CPUSecondsPerTA: 0.0025, APIServerCPUMsPerTA: 20, RateLimiter: &RateLimiterStats{Exposed: true, WaitSeconds: 0.5},
			Deletion: &Deletion{By: "the harness", RequestsPerTA: 1, Harness: requestTable(map[string]float64{"delete taskactions.flyte.org 200": 4}, 4)}},
		{Mode: "executor", N: 4, Succeeded: 4, CPUSecondsPerTA: 0.005, APIServerCPUMsPerTA: 40, RateLimiter: &RateLimiterStats{Exposed: false},
			Deletion: &Deletion{By: "the executor's garbage collector", RequestsPerTA: 1.25, Controller: requestTable(map[string]float64{"delete taskactions.flyte.org 200": 4, "list taskactions.flyte.org 200": 1}, 4)}},
	}}
	md := r.Markdown("x.png")
	for _, want := range []string{
		"| **controller CPU / TaskAction (s)** | 0.0025 | 0.0050 | 2.00 |",
		"| **kube-apiserver CPU / TaskAction (ms)** | 20.0 | 40.0 | 2.00 |",
		"| client rate limiter: total wait (s) | 0.50 | n/a | – |",
		"| **deletion: deleter's requests / TaskAction** | 1.00 | 1.25 | 1.25 |",
		"| harness: delete taskactions.flyte.org 200 | 4 | 1.000 |",
		"| controller: list taskactions.flyte.org 200 | 1 | 0.250 |",
		"executor does not serve `rest_client_rate_limiter_duration_seconds`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// --unrelated is said in the header and kept in the JSON; without it neither
// changes.
func TestReportUnrelated(t *testing.T) {
	const want = "3 unrelated TaskActions and 3 unrelated pods in another namespace (bench-unrelated), created before the controller started; both controllers scoped to the bench namespace default"
	for _, n := range []int{0, 3} {
		r := &Report{Params: Params{N: 2, Unrelated: n}, Modes: []*ModeResult{{Mode: "floor", N: 2, Succeeded: 2}}}
		md := r.Markdown("x.png")
		search := (&Report{Params: Params{Unrelated: n}, SearchParams: &SearchParams{}}).SearchMarkdown()
		js, err := json.Marshal(r.Params)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			if strings.Contains(md+search, "unrelated") || strings.Contains(string(js), "unrelated") {
				t.Errorf("no unrelated objects, yet:\n%s\n%s\n%s", md, search, js)
			}
			continue
		}
		if !strings.Contains(md, want) || !strings.Contains(search, want) || !strings.Contains(string(js), `"unrelated":3`) {
			t.Errorf("lacks the unrelated objects:\n%s\n%s\n%s", md, search, js)
		}
	}
}

// The unrelated objects are outside the bench namespace, named apart from
// the workload's, and the pods are never scheduled nor taken for the
// executor's.
func TestUnrelatedObjects(t *testing.T) {
	for _, workload := range []string{workloadTyped, workloadFlyte} {
		ta, err := unrelatedTaskAction(options{Workload: workload}, 7, "file:///tmp/b")
		if err != nil {
			t.Fatal(err)
		}
		if ta.Namespace != unrelatedNamespace || ta.Namespace == benchNamespace || ta.Name != "unrelated-00007" {
			t.Errorf("%s: TaskAction %s/%s", workload, ta.Namespace, ta.Name)
		}
	}
	pod := unrelatedPod(7)
	if pod.Namespace != unrelatedNamespace || pod.Spec.SchedulerName != "none-bench" || len(pod.Labels) != 0 ||
		len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Image != "busybox" {
		t.Errorf("pod %+v", pod)
	}
}

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		workload          string
		n                 int
		fail, retry       float64
		wantFail, wantRet int
	}{
		{workloadRetries, 60, 0.1, 0.3, 6, 18},
		{workloadRetries, 2000, 0.1, 0.3, 200, 600},
		{workloadRetries, 100, 0, 1, 0, 100},
		{workloadRetries, 100, 0.5, 0.8, 50, 50}, // retries only among those that do not fail
		{workloadRetries, 100, 1, 0.3, 100, 0},
		{workloadTyped, 100, 0.1, 0.3, 10, 0},
		{workloadFlyte, 100, 0.1, 0.3, 10, 0},
	} {
		o := options{Workload: tc.workload, FailFraction: tc.fail, RetryFraction: tc.retry}
		fails, retries, attempts := 0, 0, 0
		for i := range tc.n {
			oc := outcomeOf(o, i)
			if oc.fail && oc.retry {
				t.Fatalf("%+v: TaskAction %d both fails and is retried", tc, i)
			}
			if oc.fail {
				fails++
			}
			if oc.retry {
				retries++
			}
			attempts += oc.attempts()
		}
		if fails != tc.wantFail || retries != tc.wantRet || attempts != tc.n+tc.wantRet {
			t.Errorf("%+v: %d failing, %d retried, %d attempts", tc, fails, retries, attempts)
		}
	}
}

// Both forms decode, with the executor's own decoder, to the container and
// the retries the workload means; the floor's pod for an attempt carries what
// the kwok Stages read (the attempt label, the fail marker).
func TestWorkloadTaskActions(t *testing.T) {
	for _, workload := range []string{workloadTyped, workloadFlyte, workloadRetries} {
		o := options{Workload: workload, FailFraction: 0, RetryFraction: 1}
		ta, oc, err := workloadTaskAction(o, 7, "file:///tmp/b")
		if err != nil {
			t.Fatal(err)
		}
		if ta.Name != taskActionName(o, 7) {
			t.Errorf("%s: name %q, taskActionName %q", workload, ta.Name, taskActionName(o, 7))
		}
		tk, err := task.FromTaskAction(ta)
		if err != nil {
			t.Fatalf("%s: %v", workload, err)
		}
		if workload == workloadFlyte && (len(ta.Spec.TaskTemplate) == 0 || ta.Spec.Template != nil || tk.Form != task.FormFlyte) {
			t.Errorf("flyte: not the serialized form")
		}
		wantRetries := int32(0)
		if workload == workloadRetries {
			wantRetries = 1
		}
		if !oc.retry != (wantRetries == 0) || tk.Retries != wantRetries || tk.Container == nil {
			t.Errorf("%s: retry %v, retries %d, container %v", workload, oc.retry, tk.Retries, tk.Container)
		}
		pod := floorPod(ta, tk, 2)
		if pod.Labels[container.LabelAttempt] != "2" || pod.Name != container.PodName(ta.Name, 2) {
			t.Errorf("%s: pod %s labels %v", workload, pod.Name, pod.Labels)
		}
		if want := oc.failMarker(); pod.Annotations[kwokrig.FailAnnotation] != want {
			t.Errorf("%s: fail marker %q, want %q", workload, pod.Annotations[kwokrig.FailAnnotation], want)
		}
	}
}

func TestRateLimiterStats(t *testing.T) {
	before := parseProm([]byte(`rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="POST",le="0.005"} 10
rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="POST",le="0.025"} 10
rest_client_rate_limiter_duration_seconds_sum{host="h",verb="POST"} 0.01
rest_client_rate_limiter_duration_seconds_count{host="h",verb="POST"} 10
`))
	after := parseProm([]byte(`rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="POST",le="0.005"} 100
rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="POST",le="0.025"} 105
rest_client_rate_limiter_duration_seconds_sum{host="h",verb="POST"} 2.01
rest_client_rate_limiter_duration_seconds_count{host="h",verb="POST"} 110
rest_client_rate_limiter_duration_seconds_bucket{host="h",verb="PATCH",le="0.025"} 5
rest_client_rate_limiter_duration_seconds_sum{host="h",verb="PATCH"} 0
rest_client_rate_limiter_duration_seconds_count{host="h",verb="PATCH"} 5
`))
	st := rateLimiterStats(before, after, 105)
	if !st.Exposed || st.WaitSeconds != 2 || st.Waits != 105 || st.WaitsOver25ms != 5 || st.MeanWaitMS != round3(2000.0/105) {
		t.Fatalf("%+v", st)
	}
	if st := rateLimiterStats(nil, parseProm([]byte("executor_api_requests_total 3\n")), 3); st.Exposed {
		t.Fatalf("not served, but %+v", st)
	}
}

func TestSearchReport(t *testing.T) {
	dir := t.TempDir()
	r := &Report{SearchParams: &SearchParams{StartRate: 10, Factor: 2, Step: "1m0s", P99Bound: "30s", MaxSteps: 6},
		Search: []*SearchResult{{Mode: "floor", SustainedRate: 20, Steps: []*SearchStep{
			{Rate: 10, Created: 600, Pass: true}, {Rate: 20, Created: 1200, Pass: true},
			{Rate: 40, Created: 2400, Why: "p99 create → terminal 40000 ms > 30000 ms"}}}}}
	paths, err := r.Write(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || !strings.HasSuffix(paths[0], "-search.json") {
		t.Fatal(paths)
	}
	md, _ := os.ReadFile(paths[1])
	if !strings.Contains(string(md), "| floor | 20.0 | p99 create → terminal 40000 ms > 30000 ms |") {
		t.Fatalf("markdown:\n%s", md)
	}
}

// The machine's CPU counters read from /proc/stat: busy time is a part of all
// time, and neither goes back.
func TestReadMachineCPU(t *testing.T) {
	a, err := readMachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	b, err := readMachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	if a.Busy <= 0 || a.Busy > a.All || b.Busy < a.Busy || b.All < a.All {
		t.Fatalf("before %+v, after %+v", a, b)
	}
	if busy, share := (machineCPU{Busy: 13, All: 20}).since(machineCPU{Busy: 10, All: 16}); busy != 3 || share != 0.75 {
		t.Errorf("busy %v, share %v; want 3 and 0.75", busy, share)
	}
	if _, share := a.since(a); share != 0 {
		t.Errorf("share over no time %v, want 0", share)
	}
}

// inParallel hands out every index once, from first, and returns the first
// error, after which it hands out no more.
func TestInParallel(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	if err := inParallel(context.Background(), 4, 5, 100, 0, func(i int) error {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 105; i++ {
		if seen[i] != 1 {
			t.Fatalf("index %d handed out %d times", i, seen[i])
		}
	}
	if len(seen) != 100 {
		t.Fatalf("%d indexes handed out, want 100", len(seen))
	}
	boom := errors.New("boom")
	var calls atomic.Int64
	err := inParallel(context.Background(), 2, 0, 1000, 0, func(i int) error {
		calls.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want %v", err, boom)
	}
	if c := calls.Load(); c >= 1000 {
		t.Fatalf("%d calls after the error, want the rest not handed out", c)
	}
}

// --floor-pod: the minimal pod, or the executor's own (Flyte's environment,
// its default resources); anything else is refused.
func TestFloorPodBuilder(t *testing.T) {
	ta := typedTaskAction(7, outcome{}, "")
	ta.Namespace = "default"
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind     string
		flyteEnv bool
	}{{floorPodMinimal, false}, {floorPodExecutor, true}} {
		build, err := floorPodBuilder(c.kind)
		if err != nil {
			t.Fatal(err)
		}
		pod, err := build(ta, tk, 1)
		if err != nil {
			t.Fatal(err)
		}
		hasEnv := false
		for _, e := range pod.Spec.Containers[0].Env {
			hasEnv = hasEnv || e.Name == "FLYTE_INTERNAL_EXECUTION_ID"
		}
		if hasEnv != c.flyteEnv || pod.Name != container.PodName(ta.Name, 1) || pod.Spec.Containers[0].Resources.Requests.Cpu().IsZero() {
			t.Errorf("%s: name %s, Flyte's environment %v (want %v), requests %v", c.kind, pod.Name, hasEnv, c.flyteEnv, pod.Spec.Containers[0].Resources.Requests)
		}
	}
	if _, err := floorPodBuilder("large"); err == nil {
		t.Error("--floor-pod large accepted")
	}
}

// The bench's flags that cannot go together are refused before any rig starts.
func TestOptionsRefused(t *testing.T) {
	ok := options{N: 10, Mode: "both", Workload: workloadTyped, FloorPod: floorPodMinimal, GCInterval: time.Minute, GCTTL: time.Second, Rounds: 1}
	if err := ok.check(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for name, mutate := range map[string]func(*options){
		"--floor-webhook with the deletion phase": func(o *options) { o.FloorWebhook, o.GC = true, true },
		"--floor-pod large":                       func(o *options) { o.FloorPod = "large" },
		"--n 0":                                   func(o *options) { o.N = 0 },
		"--rounds 0":                              func(o *options) { o.Rounds = 0 },
		"--rounds 3 of the executor alone":        func(o *options) { o.Rounds, o.Mode = 3, "executor" },
		"--rounds 3 with --profile-apiserver":     func(o *options) { o.Rounds, o.ProfileAPIServer = 3, time.Minute },
	} {
		o := ok
		mutate(&o)
		if err := o.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

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

// The controller's own requests split into reads and kinds of writes, failed
// writes included.
func TestWriteSplit(t *testing.T) {
	tab := requestTable(map[string]float64{
		"create pods 201": 10, "patch taskactions.flyte.org/status 200": 20, "patch taskactions.flyte.org/status 409": 1,
		"patch taskactions.flyte.org 200": 10, "delete pods 200": 2, "get none 200": 1, "list taskactions.flyte.org 200": 1,
	}, 10)
	want := WriteSplit{Writes: 4.3, PodCreates: 1, StatusWrites: 2.1, MetadataWrites: 1, OtherWrites: 0.2, Reads: 0.2}
	if got := writeSplit(tab, 10); got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
	if got := writeSplit(RequestTable{}, 0); got != (WriteSplit{}) {
		t.Fatalf("no TaskActions: %+v", got)
	}
}

// The Executing and write rows: "—" where the floor has no Executing; the
// goals judged from the ratio and the executor's writes.
func TestReportExecutingRows(t *testing.T) {
	report := func(exWrites, exSeen float64) *Report {
		return &Report{Params: Params{N: 10, Webhook: true, FinishDelay: "2s"}, Modes: []*ModeResult{
			{Mode: "floor", N: 10, Succeeded: 10, TaskActionsPerSecond: 50,
				ControllerWrites:    WriteSplit{Writes: 2, PodCreates: 1, StatusWrites: 1},
				SeenWritesSucceeded: &SeenWrites{TaskActions: 10, PodsCreated: 1, StatusUpdates: 1, Writes: 2}},
			{Mode: "executor", N: 10, Succeeded: 10, TaskActionsPerSecond: 40,
				ControllerWrites:    WriteSplit{Writes: exWrites, PodCreates: 1, StatusWrites: exWrites - 1},
				SeenWritesSucceeded: &SeenWrites{TaskActions: 10, PodsCreated: 1, StatusUpdates: exSeen - 1, Writes: exSeen},
				Executing:           &ExecutingStats{PodRunningToExecutingMS: Percentiles{Count: 7, P50: 120, P99: 900}, EndedWithoutExecuting: 3}},
		}}
	}
	md := report(3, 3).Markdown("x.png")
	for _, want := range []string{
		"| pod running → TaskAction Executing p50 (ms) | — | 120 | – |",
		"| pod running → TaskAction Executing p99 (ms) | — | 900 | – |",
		"| TaskActions ended without showing Executing (straight from Queued) | — | 3 | – |",
		"| **controller's own writes / TaskAction** | 2.00 | 3.00 | 1.50 |",
		"| … TaskAction status writes / TaskAction | 1.00 | 2.00 | 2.00 |",
		"| … TaskAction metadata writes (finalizer) / TaskAction | 0.00 | 0.00 | – |",
		"| **writes / succeeded TaskAction, seen on the watches** | 2.00 | 3.00 | 1.50 |",
		"Goals: throughput executor ÷ floor 0.80 (goal ≥ 0.7: met); the executor's writes 3.00 per TaskAction (its own count, every outcome) and 3.00 per succeeded TaskAction (seen on the watches), with the webhook, tasks of 2s (goal ≤ 3 per short successful TaskAction: met).",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if md := report(3, 3.2).Markdown("x.png"); !strings.Contains(md, "3.20 per succeeded TaskAction (seen on the watches), with the webhook, tasks of 2s (goal ≤ 3 per short successful TaskAction: **not met**)") {
		t.Errorf("writes above the goal not flagged:\n%s", md)
	}
	r := report(2, 2)
	r.Modes[1].Executing = &ExecutingStats{EndedWithoutExecuting: 10}
	if md := r.Markdown("x.png"); !strings.Contains(md, "| pod running → TaskAction Executing p99 (ms) | — | — | – |") ||
		!strings.Contains(md, "| TaskActions ended without showing Executing (straight from Queued) | — | 10 | – |") {
		t.Errorf("none seen Executing: the latency is not 0 but none:\n%s", md)
	}
	r = report(3, 3)
	r.Params.Webhook = false
	if md := r.Markdown("x.png"); strings.Contains(md, "per short successful TaskAction") {
		t.Errorf("without the webhook the writes goal does not apply:\n%s", md)
	}
	js, err := json.Marshal(report(3, 3).Modes)
	if err != nil {
		t.Fatal(err)
	}
	var modes []map[string]any
	if err := json.Unmarshal(js, &modes); err != nil {
		t.Fatal(err)
	}
	if _, ok := modes[0]["executing"]; ok {
		t.Errorf("floor JSON has executing: %s", js)
	}
	if e, ok := modes[1]["executing"].(map[string]any); !ok || e["endedWithoutExecuting"] != float64(3) || e["podRunningToExecutingMs"] == nil {
		t.Errorf("executor JSON: %s", js)
	}
}
