package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

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
	if !strings.Contains(string(md), "| floor | 20.0 | 40.0/s: p99 create → terminal 40000 ms > 30000 ms |") {
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
