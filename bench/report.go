package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
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
}

type Params struct {
	N            int     `json:"n"`
	Rate         float64 `json:"ratePerSecond"`
	FailFraction float64 `json:"failFraction"`
	RunDelay     string  `json:"runDelay"`
	FinishDelay  string  `json:"finishDelay"`
	Nodes        int     `json:"nodes"`
	QPS          float64 `json:"controllerQPS"`
	Burst        int     `json:"controllerBurst"`
	Creators     int     `json:"creators"`
	ExecutorBin  string  `json:"executorBinary,omitempty"`
	ExecutorSHA  string  `json:"executorSHA256,omitempty"`
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

type EventStats struct {
	RecordCalls              int64   `json:"recordCalls"`
	Events                   int64   `json:"events"`
	RecordCallsPer1000Events float64 `json:"recordCallsPer1000Events"`
	EventsPerTA              float64 `json:"eventsPerTaskAction"`
	Undecoded                int64   `json:"undecodedRecordCalls"`
	FailedCalls              int64   `json:"failedRecordCalls"`
}

type ModeResult struct {
	Mode                    string  `json:"mode"`
	Error                   string  `json:"error,omitempty"`
	N                       int     `json:"n"`
	Succeeded               int     `json:"succeeded"`
	Failed                  int     `json:"failed"`
	Unfinished              int     `json:"unfinished"`
	UnexpectedOutcomes      int     `json:"unexpectedOutcomes"`
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
	Harness             RequestTable `json:"harnessRequests"`
	OtherRequestsPerTA  float64      `json:"otherRequestsPerTaskAction"`

	Events *EventStats `json:"events,omitempty"`

	PeakRSSMiB      float64            `json:"peakRSSMiB"`
	CPUSeconds      float64            `json:"cpuSeconds"`
	CPUSecondsTotal float64            `json:"cpuSecondsWithStartup"`
	ExecutorMetrics map[string]float64 `json:"controllerMetrics,omitempty"`
	LogErrors       int                `json:"logErrors"`
	LogErrorSamples []string           `json:"logErrorSamples,omitempty"`

	// Completions are the seconds from the first create to each TaskAction's end.
	Completions []float64 `json:"completions"`
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
	return fmt.Sprintf("%d ok, %d failed, %d unfinished in %.1fs: %.1f TaskActions/s; create→pod p50/p99 %.0f/%.0f ms; pod end→TaskAction end p50/p99 %.0f/%.0f ms; %.2f requests/TaskAction (own), %.2f at the API server; RSS %.0f MiB, CPU %.1fs",
		m.Succeeded, m.Failed, m.Unfinished, m.WallSeconds, m.TaskActionsPerSecond, m.CreateToPodMS.P50, m.CreateToPodMS.P99,
		m.PodTerminalToTerminalMS.P50, m.PodTerminalToTerminalMS.P99, m.Controller.TotalPerTA, m.APIServer.TotalPerTA, m.PeakRSSMiB, m.CPUSeconds)
}

// Write stores the JSON, the Markdown table and the chart; it returns their paths.
func (r *Report) Write(dir, tag string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := fmt.Sprintf("%s-%d", r.Started.Format("2006-01-02"), r.Params.N)
	if tag != "" {
		base += "-" + tag
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
	if err := os.WriteFile(mp, []byte(r.Markdown(filepath.Base(pp))), 0o644); err != nil {
		return nil, err
	}
	if err := writeChart(pp, r); err != nil {
		return nil, err
	}
	return []string{jp, mp, pp}, nil
}

func (r *Report) mode(name string) *ModeResult {
	for _, m := range r.Modes {
		if m.Mode == name {
			return m
		}
	}
	return nil
}

// Markdown is the results table: one column per mode, and executor ÷ floor.
func (r *Report) Markdown(png string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Benchmark %s, N=%d\n\n", r.Started.Format("2006-01-02 15:04 UTC"), r.Params.N)
	p("`%s`\n\n", r.Command)
	p("Rate %s, fail fraction %.2f, run delay %s, finish delay %s, %d kwok nodes, controller client QPS %.0f / burst %d. ",
		rateText(r.Params.Rate), r.Params.FailFraction, r.Params.RunDelay, r.Params.FinishDelay, r.Params.Nodes, r.Params.QPS, r.Params.Burst)
	if r.Params.ExecutorSHA != "" {
		p("Executor binary %s (sha256 %s). ", r.Params.ExecutorBin, r.Params.ExecutorSHA)
	}
	p("Machine: %d CPUs (%s), %d GiB, Linux %s, %s, commit %s, load average at start %s.\n\n",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.MemoryKiB>>20, r.Machine.Kernel, r.Machine.GoVersion, short(r.Machine.Commit), r.Machine.LoadAvg)
	fl, ex := r.mode("floor"), r.mode("executor")
	cols := []*ModeResult{}
	hdr := "| |"
	sep := "|---|"
	for _, m := range []*ModeResult{fl, ex} {
		if m != nil {
			cols = append(cols, m)
			hdr += " " + m.Mode + " |"
			sep += "---:|"
		}
	}
	ratio := fl != nil && ex != nil
	if ratio {
		hdr += " executor ÷ floor |"
		sep += "---:|"
	}
	p("%s\n%s\n", hdr, sep)
	row := func(name string, f func(*ModeResult) float64, format string) {
		p("| %s |", name)
		for _, m := range cols {
			p(" "+format+" |", f(m))
		}
		if ratio {
			if d := f(fl); d != 0 {
				p(" %.2f |", f(ex)/d)
			} else {
				p(" – |")
			}
		}
		p("\n")
	}
	row("TaskActions ended (ok + failed)", func(m *ModeResult) float64 { return float64(m.Succeeded + m.Failed) }, "%.0f")
	row("failed (expected: fail fraction × N)", func(m *ModeResult) float64 { return float64(m.Failed) }, "%.0f")
	row("unfinished", func(m *ModeResult) float64 { return float64(m.Unfinished) }, "%.0f")
	row("time to create all (s)", func(m *ModeResult) float64 { return m.CreateSeconds }, "%.1f")
	row("first create → last terminal (s)", func(m *ModeResult) float64 { return m.WallSeconds }, "%.1f")
	row("**TaskActions/s to terminal**", func(m *ModeResult) float64 { return m.TaskActionsPerSecond }, "%.1f")
	row("create → pod created p50 (ms)", func(m *ModeResult) float64 { return m.CreateToPodMS.P50 }, "%.0f")
	row("create → pod created p90 (ms)", func(m *ModeResult) float64 { return m.CreateToPodMS.P90 }, "%.0f")
	row("create → pod created p99 (ms)", func(m *ModeResult) float64 { return m.CreateToPodMS.P99 }, "%.0f")
	row("pod terminal → TaskAction terminal p50 (ms)", func(m *ModeResult) float64 { return m.PodTerminalToTerminalMS.P50 }, "%.0f")
	row("pod terminal → TaskAction terminal p90 (ms)", func(m *ModeResult) float64 { return m.PodTerminalToTerminalMS.P90 }, "%.0f")
	row("pod terminal → TaskAction terminal p99 (ms)", func(m *ModeResult) float64 { return m.PodTerminalToTerminalMS.P99 }, "%.0f")
	row("create → TaskAction terminal p50 (ms)", func(m *ModeResult) float64 { return m.CreateToTerminalMS.P50 }, "%.0f")
	row("create → TaskAction terminal p99 (ms)", func(m *ModeResult) float64 { return m.CreateToTerminalMS.P99 }, "%.0f")
	row("controller's own API requests / TaskAction", func(m *ModeResult) float64 { return m.Controller.TotalPerTA }, "%.2f")
	row("… of which non-2xx / TaskAction", func(m *ModeResult) float64 { return m.Controller.Non2xx / float64(m.N) }, "%.3f")
	row("… of which 409 conflicts / TaskAction", func(m *ModeResult) float64 { return m.Controller.Conflicts / float64(m.N) }, "%.3f")
	row("API server requests / TaskAction (everyone)", func(m *ModeResult) float64 { return m.APIServer.TotalPerTA }, "%.2f")
	row("… harness's own / TaskAction", func(m *ModeResult) float64 { return m.Harness.TotalPerTA }, "%.2f")
	row("… others (kube-scheduler, kwok) / TaskAction", func(m *ModeResult) float64 { return m.OtherRequestsPerTA }, "%.2f")
	row("kube-apiserver CPU (s)", func(m *ModeResult) float64 { return m.APIServerCPUSeconds }, "%.1f")
	row("controller peak RSS (MiB)", func(m *ModeResult) float64 { return m.PeakRSSMiB }, "%.0f")
	row("controller CPU during the run (s)", func(m *ModeResult) float64 { return m.CPUSeconds }, "%.1f")
	row("controller error log lines", func(m *ModeResult) float64 { return float64(m.LogErrors) }, "%.0f")
	if ex != nil && ex.Events != nil {
		p("\nEvents (executor only; the floor sends none): %d Record calls carrying %d events = **%.1f Record calls per 1,000 events**, %.2f events per TaskAction (%d failed calls, %d undecoded).\n",
			ex.Events.RecordCalls, ex.Events.Events, ex.Events.RecordCallsPer1000Events, ex.Events.EventsPerTA, ex.Events.FailedCalls, ex.Events.Undecoded)
	}
	for _, m := range cols {
		p("\n## %s: own API requests per TaskAction (client side, `executor_api_requests_total`)\n\n", m.Mode)
		p("| verb resource code | count | per TaskAction |\n|---|---:|---:|\n")
		for _, rr := range m.Controller.Rows {
			p("| %s | %.0f | %.3f |\n", rr.Key, rr.Count, rr.PerTA)
		}
	}
	for _, m := range cols {
		p("\n## %s: kube-apiserver `apiserver_request_total`, whole rig, per TaskAction\n\n", m.Mode)
		p("| VERB resource code | count | per TaskAction |\n|---|---:|---:|\n")
		for _, rr := range m.APIServer.Rows {
			if rr.PerTA < 0.001 {
				continue
			}
			p("| %s | %.0f | %.3f |\n", rr.Key, rr.Count, rr.PerTA)
		}
	}
	for _, m := range cols {
		if m.Error != "" {
			p("\n**%s: %s**\n", m.Mode, m.Error)
		}
		if len(m.LogErrorSamples) > 0 {
			p("\n%s error log samples:\n\n", m.Mode)
			for _, s := range m.LogErrorSamples {
				p("    %s\n", s)
			}
		}
	}
	p("\n![completions over time](%s)\n\n", png)
	p("The chart: TaskActions terminal (y, 0 to N) against seconds since the first create (x); floor in blue, executor in red; grid lines every 10%% of N and at round seconds (the numbers on the axes are the maxima).\n")
	return b.String()
}

func rateText(r float64) string {
	if r <= 0 {
		return "all at once"
	}
	return fmt.Sprintf("%.0f/s", r)
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
