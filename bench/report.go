package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Report is bench/results/<date>-<n>.json.
type Report struct {
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Command  string        `json:"command"`
	Params   Params        `json:"params"`
	Machine  Machine       `json:"machine"`
	Modes    []*ModeResult `json:"modes"`
	// Rounds are --rounds' pairs, one per round (none for a single round).
	Rounds []RoundResult `json:"rounds,omitempty"`
	// SearchParams and Search are --search's.
	SearchParams *SearchParams   `json:"searchParams,omitempty"`
	Search       []*SearchResult `json:"search,omitempty"`
}

type Params struct {
	N             int     `json:"n"`
	Rate          float64 `json:"ratePerSecond"`
	FailFraction  float64 `json:"failFraction"`
	RunDelay      string  `json:"runDelay"`
	FinishDelay   string  `json:"finishDelay"`
	Nodes         int     `json:"nodes"`
	QPS           float64 `json:"controllerQPS"`
	Burst         int     `json:"controllerBurst"`
	Creators      int     `json:"creators"`
	Workload      string  `json:"workload"`
	RetryFraction float64 `json:"retryFraction,omitempty"`
	FloorQPS      float64 `json:"floorQPS"`
	FloorBurst    int     `json:"floorBurst"`
	FloorPod      string  `json:"floorPod,omitempty"`
	FloorWebhook  bool    `json:"floorWebhook,omitempty"`
	GC            bool    `json:"deletionPhase"`
	Webhook       bool    `json:"executorWebhooks"`
	GCInterval    string  `json:"gcInterval,omitempty"`
	GCTTL         string  `json:"gcMaxTTL,omitempty"`
	ExecutorBin   string  `json:"executorBinary,omitempty"`
	ExecutorSHA   string  `json:"executorSHA256,omitempty"`

	// Unrelated is --unrelated: TaskActions, and as many pods, in another
	// namespace, present before the controller started.
	Unrelated int `json:"unrelated,omitempty"`
	// Rounds is --rounds when above 1.
	Rounds int `json:"rounds,omitempty"`
}

type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// RequestRow is one "verb resource code" of a request count.
type RequestRow struct {
	Key   string  `json:"key"`
	Count float64 `json:"count"`
	PerTA float64 `json:"perTaskAction"`
}

type RequestTable struct {
	Total      float64      `json:"total"`
	TotalPerTA float64      `json:"totalPerTaskAction"`
	Non2xx     float64      `json:"non2xx"`
	Conflicts  float64      `json:"conflicts409"`
	Rows       []RequestRow `json:"rows"`
}

// WriteSplit is the controller's own requests per TaskAction by kind,
// client side: every request that is not a read is a write, failed or not.
type WriteSplit struct {
	Writes       float64 `json:"writesPerTaskAction"`
	PodCreates   float64 `json:"podCreatesPerTaskAction"`
	StatusWrites float64 `json:"statusWritesPerTaskAction"`
	// MetadataWrites are writes of the TaskAction itself, not its status:
	// the finalizer's patches.
	MetadataWrites float64 `json:"metadataWritesPerTaskAction"`
	OtherWrites    float64 `json:"otherWritesPerTaskAction"`
	Reads          float64 `json:"readsPerTaskAction"`
}

// writeSplit sorts the rows of t ("verb resource code", as clientKey makes
// them) into reads and kinds of writes, per TaskAction of n.
func writeSplit(t RequestTable, n int) WriteSplit {
	var w WriteSplit
	if n <= 0 {
		return w
	}
	for _, r := range t.Rows {
		f := strings.Fields(r.Key)
		if len(f) < 2 {
			w.OtherWrites += r.Count
			continue
		}
		verb, res := strings.ToLower(f[0]), f[1]
		taskAction := strings.HasPrefix(res, "taskactions")
		switch {
		case verb == "get" || verb == "list" || verb == "watch":
			w.Reads += r.Count
		case verb == "create" && res == "pods":
			w.PodCreates += r.Count
		case taskAction && strings.HasSuffix(res, "/status"):
			w.StatusWrites += r.Count
		case taskAction && !strings.Contains(res, "/"):
			w.MetadataWrites += r.Count
		default:
			w.OtherWrites += r.Count
		}
	}
	per := func(v float64) float64 { return round3(v / float64(n)) }
	w.Writes = per(w.PodCreates + w.StatusWrites + w.MetadataWrites + w.OtherWrites)
	w.PodCreates, w.StatusWrites, w.MetadataWrites, w.OtherWrites, w.Reads = per(w.PodCreates), per(w.StatusWrites), per(w.MetadataWrites), per(w.OtherWrites), per(w.Reads)
	return w
}

// SeenWrites are the writes the harness's watches saw of the TaskActions of
// one outcome, per TaskAction: each pod seen (a create) and each update of
// the TaskAction (a new resourceVersion), status or metadata. A write that
// changed nothing makes no update and is not seen; the controller's own
// count (WriteSplit) has it.
type SeenWrites struct {
	TaskActions     int     `json:"taskActions"`
	PodsCreated     float64 `json:"podsCreatedPerTaskAction"`
	StatusUpdates   float64 `json:"statusUpdatesPerTaskAction"`
	MetadataUpdates float64 `json:"metadataUpdatesPerTaskAction"`
	Writes          float64 `json:"writesPerTaskAction"`
}

// ExecutingStats: how soon the TaskAction showed Executing (Progressing=True,
// reason Executing: what Flyte's UI shows as running) after its pod ran,
// both as the harness's watches saw them.
type ExecutingStats struct {
	PodRunningToExecutingMS Percentiles `json:"podRunningToExecutingMs"`
	// EndedWithoutExecuting: ended TaskActions never seen Executing
	// (straight from Queued to their end).
	EndedWithoutExecuting int `json:"endedWithoutExecuting"`
	// SeenBeforePodRunning: Executing arrived before the pod's Running on
	// the harness's watches, counted as 0 ms.
	SeenBeforePodRunning int `json:"executingSeenBeforePodRunning"`
}

type EventStats struct {
	RecordCalls              int64   `json:"recordCalls"`
	Events                   int64   `json:"events"`
	RecordCallsPer1000Events float64 `json:"recordCallsPer1000Events"`
	EventsPerTA              float64 `json:"eventsPerTaskAction"`
	FailedCalls              int64   `json:"failedRecordCalls"`
}

// RateLimiterStats is the controller's wait on client-go's client-side rate
// limiter during the hot path (rest_client_rate_limiter_duration_seconds).
type RateLimiterStats struct {
	// Exposed is false when the controller does not serve the metric.
	Exposed          bool    `json:"exposed"`
	WaitSeconds      float64 `json:"waitSecondsTotal"`
	Waits            float64 `json:"requests"`
	MeanWaitMS       float64 `json:"meanWaitMs"`
	WaitsOver25ms    float64 `json:"requestsWaitingOver25ms"`
	WaitMSPerRequest float64 `json:"waitMsPerRequest"`
}

// RoundResult is one round of --rounds: a floor run and an executor run
// back to back, each on a fresh control plane, compared with each other
// only, since the machine's speed drifts between rounds.
type RoundResult struct {
	Round             int     `json:"round"`
	First             string  `json:"first"`
	FloorPerSecond    float64 `json:"floorTaskActionsPerSecond"`
	ExecutorPerSecond float64 `json:"executorTaskActionsPerSecond"`
	Ratio             float64 `json:"ratio"`
	// MachineCPURatio is the executor's machine CPU per TaskAction over the floor's.
	MachineCPURatio float64 `json:"machineCPUPerTaskActionRatio"`
	// ControllerCPURatio and APIServerCPURatio: the controller's own CPU
	// per TaskAction, and kube-apiserver's, executor over floor.
	ControllerCPURatio float64 `json:"controllerCPUPerTaskActionRatio,omitempty"`
	APIServerCPURatio  float64 `json:"apiServerCPUPerTaskActionRatio,omitempty"`
}

// roundResults pairs the floor and executor runs of each round, in round
// order; a round with a failed or missing run has no pair.
func roundResults(modes []*ModeResult) []RoundResult {
	type pair struct{ first, floor, executor *ModeResult }
	var rounds []int
	byRound := map[int]*pair{}
	for _, m := range modes {
		if m.Round == 0 {
			continue
		}
		pr := byRound[m.Round]
		if pr == nil {
			pr = &pair{first: m}
			byRound[m.Round] = pr
			rounds = append(rounds, m.Round)
		}
		switch m.Mode {
		case "floor":
			pr.floor = m
		case "executor":
			pr.executor = m
		}
	}
	var out []RoundResult
	for _, r := range rounds {
		fl, ex := byRound[r].floor, byRound[r].executor
		if fl == nil || ex == nil || fl.Error != "" || ex.Error != "" || fl.TaskActionsPerSecond <= 0 {
			continue
		}
		rr := RoundResult{Round: r, First: byRound[r].first.Mode, FloorPerSecond: fl.TaskActionsPerSecond,
			ExecutorPerSecond: ex.TaskActionsPerSecond, Ratio: round3(ex.TaskActionsPerSecond / fl.TaskActionsPerSecond)}
		if fl.MachineCPUSeconds > 0 && fl.N > 0 && ex.N > 0 {
			rr.MachineCPURatio = round3(ex.MachineCPUSeconds / float64(ex.N) / (fl.MachineCPUSeconds / float64(fl.N)))
		}
		if fl.CPUSecondsPerTA > 0 {
			rr.ControllerCPURatio = round3(ex.CPUSecondsPerTA / fl.CPUSecondsPerTA)
		}
		if fl.APIServerCPUMsPerTA > 0 {
			rr.APIServerCPURatio = round3(ex.APIServerCPUMsPerTA / fl.APIServerCPUMsPerTA)
		}
		out = append(out, rr)
	}
	return out
}

// medianRound is the round whose ratio is the median (of an even count, the
// lower of the middle two), and the median ratio itself; 0, 0 without rounds.
func medianRound(rs []RoundResult) (round int, median float64) {
	if len(rs) == 0 {
		return 0, 0
	}
	s := append([]RoundResult(nil), rs...)
	sort.SliceStable(s, func(i, j int) bool { return s[i].Ratio < s[j].Ratio })
	mid := (len(s) - 1) / 2
	median = s[mid].Ratio
	if len(s)%2 == 0 {
		median = round3((s[mid].Ratio + s[mid+1].Ratio) / 2)
	}
	return s[mid].Round, median
}

type ModeResult struct {
	Mode string `json:"mode"`
	// Round is the mode's round of --rounds (1-based; 0 for a single round).
	Round int `json:"round,omitempty"`
	// Quiet is the wait for a quiet machine before the mode started.
	Quiet              *Quiet `json:"quietBefore,omitempty"`
	Workload           string `json:"workload,omitempty"`
	Error              string `json:"error,omitempty"`
	N                  int    `json:"n"`
	Succeeded          int    `json:"succeeded"`
	Failed             int    `json:"failed"`
	Unfinished         int    `json:"unfinished"`
	UnexpectedOutcomes int    `json:"unexpectedOutcomes"`
	Retried            int    `json:"retried"`
	// Attempts are the pods the harness saw (one per attempt).
	Attempts                int     `json:"attempts"`
	ExpectedAttempts        int     `json:"expectedAttempts"`
	NodesUntaintedByHarness bool    `json:"nodesUntaintedByHarness,omitempty"`
	CreateSeconds           float64 `json:"createSeconds"`
	WallSeconds             float64 `json:"wallSeconds"`
	TaskActionsPerSecond    float64 `json:"taskActionsPerSecond"`

	CreateToPodMS           Percentiles `json:"createToPodMs"`
	PodTerminalToTerminalMS Percentiles `json:"podTerminalToTaskActionTerminalMs"`
	CreateToTerminalMS      Percentiles `json:"createToTerminalMs"`

	APIServer           RequestTable `json:"apiServerRequests"`
	APIServerCPUSeconds float64      `json:"apiServerCPUSeconds"`
	Controller          RequestTable `json:"controllerRequests"`
	ControllerWrites    WriteSplit   `json:"controllerWrites"`
	// SeenWritesSucceeded and SeenWritesFailed: per TaskAction that
	// succeeded, failed (nil: none).
	SeenWritesSucceeded *SeenWrites `json:"seenWritesSucceeded,omitempty"`
	SeenWritesFailed    *SeenWrites `json:"seenWritesFailed,omitempty"`
	// Executing is the executor's (nil for the floor, which writes none).
	Executing          *ExecutingStats `json:"executing,omitempty"`
	Harness            RequestTable    `json:"harnessRequests"`
	OtherRequestsPerTA float64         `json:"otherRequestsPerTaskAction"`
	// Per attempt (pod): the controller's own and the API server's.
	RequestsPerAttempt          float64           `json:"controllerRequestsPerAttempt"`
	APIServerRequestsPerAttempt float64           `json:"apiServerRequestsPerAttempt"`
	APIServerCPUMsPerTA         float64           `json:"apiServerCPUMsPerTaskAction"`
	RateLimiter                 *RateLimiterStats `json:"clientRateLimiter,omitempty"`

	Events *EventStats `json:"events,omitempty"`

	PeakRSSMiB      float64 `json:"peakRSSMiB"`
	CPUSeconds      float64 `json:"cpuSeconds"`
	CPUSecondsTotal float64 `json:"cpuSecondsWithStartup"`
	CPUSecondsPerTA float64 `json:"cpuSecondsPerTaskAction"`
	// ServicesCPUSeconds is the events and cache services' CPU during the
	// run (the floor has none; with --floor-webhook, its webhook server's).
	ServicesCPUSeconds float64 `json:"servicesCPUSeconds,omitempty"`
	// HarnessCPUSeconds is the bench process's own CPU during the run: its
	// creates and informers.
	HarnessCPUSeconds float64 `json:"harnessCPUSeconds"`
	// MachineCPUSeconds is the whole machine's busy CPU during the run (every
	// process of the rig, the harness included), MachineBusy its share of
	// the machine's capacity: near 1, the run was bound by CPU.
	MachineCPUSeconds float64            `json:"machineCPUSeconds"`
	MachineBusy       float64            `json:"machineBusyFraction"`
	ExecutorMetrics   map[string]float64 `json:"controllerMetrics,omitempty"`
	LogErrors         int                `json:"logErrors"`
	LogErrorSamples   []string           `json:"logErrorSamples,omitempty"`

	// Completions are the seconds from the first create to each TaskAction's end.
	Completions []float64 `json:"completions"`

	// Deletion is the deletion phase (--gc), after the hot path.
	Deletion *Deletion `json:"deletion,omitempty"`
}

func requestTable(m map[string]float64, n int) RequestTable {
	var t RequestTable
	for _, k := range sortedKeys(m) {
		v := m[k]
		t.Total += v
		f := strings.Fields(k)
		if len(f) == 3 {
			if !strings.HasPrefix(f[2], "2") {
				t.Non2xx += v
			}
			if f[2] == "409" {
				t.Conflicts += v
			}
		}
		t.Rows = append(t.Rows, RequestRow{Key: k, Count: v, PerTA: round3(v / float64(n))})
	}
	sort.SliceStable(t.Rows, func(i, j int) bool { return t.Rows[i].Count > t.Rows[j].Count })
	t.TotalPerTA = round3(t.Total / float64(n))
	return t
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func (m *ModeResult) Summary() string {
	executing := ""
	if e := m.Executing; e != nil && e.PodRunningToExecutingMS.Count > 0 {
		executing = fmt.Sprintf("; pod running→Executing p50/p99 %.0f/%.0f ms, %d ended without Executing", e.PodRunningToExecutingMS.P50, e.PodRunningToExecutingMS.P99, e.EndedWithoutExecuting)
	} else if e != nil {
		executing = fmt.Sprintf("; none seen Executing, %d ended without it", e.EndedWithoutExecuting)
	}
	return fmt.Sprintf("%d ok, %d failed, %d unfinished in %.1fs: %.1f TaskActions/s; create→pod p50/p99 %.0f/%.0f ms; pod end→TaskAction end p50/p99 %.0f/%.0f ms; %.2f requests/TaskAction (own), %.2f at the API server; RSS %.0f MiB, CPU %.1fs",
		m.Succeeded, m.Failed, m.Unfinished, m.WallSeconds, m.TaskActionsPerSecond, m.CreateToPodMS.P50, m.CreateToPodMS.P99,
		m.PodTerminalToTerminalMS.P50, m.PodTerminalToTerminalMS.P99, m.Controller.TotalPerTA, m.APIServer.TotalPerTA, m.PeakRSSMiB, m.CPUSeconds) + executing
}

// resultBase is the name results files start with: the day, what was run
// (N, or "search") and the tag.
func resultBase(day time.Time, what, tag string) string {
	base := day.Format("2006-01-02") + "-" + what
	if tag != "" {
		base += "-" + tag
	}
	return base
}

// Write stores the JSON, the Markdown table and the chart; it returns their paths.
func (r *Report) Write(dir, tag string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := resultBase(r.Started, strconv.Itoa(r.Params.N), tag)
	if r.SearchParams != nil {
		base = resultBase(r.Started, "search", tag)
	}
	jp := filepath.Join(dir, base+".json")
	mp := filepath.Join(dir, base+".md")
	pp := filepath.Join(dir, base+".png")
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(jp, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	if r.SearchParams != nil {
		if err := os.WriteFile(mp, []byte(r.SearchMarkdown()), 0o644); err != nil {
			return nil, err
		}
		return []string{jp, mp}, nil
	}
	if err := os.WriteFile(mp, []byte(r.Markdown(filepath.Base(pp))), 0o644); err != nil {
		return nil, err
	}
	if err := writeChart(pp, r); err != nil {
		return nil, err
	}
	return []string{jp, mp, pp}, nil
}

// mode is the run of mode name that the full table shows: with --rounds,
// the median round's.
func (r *Report) mode(name string) *ModeResult {
	round, _ := medianRound(r.Rounds)
	for _, m := range r.Modes {
		if m.Mode == name && (round == 0 || m.Round == round) {
			return m
		}
	}
	return nil
}
