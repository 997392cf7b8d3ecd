package main

import (
	"fmt"
	"math"
	"strings"
)

// Markdown is the results table: one column per mode, and executor ÷ floor.
func (r *Report) Markdown(png string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Benchmark %s, N=%d\n\n", r.Started.Format("2006-01-02 15:04 UTC"), r.Params.N)
	p("`%s`\n\n", r.Command)
	p("Workload %s, rate %s, fail fraction %.2f, ", workloadText(r.Params.Workload), rateText(r.Params.Rate), r.Params.FailFraction)
	if r.Params.RetryFraction > 0 {
		p("retry fraction %.2f (retries 1, first attempt fails), ", r.Params.RetryFraction)
	}
	p("run delay %s, finish delay %s, %d kwok nodes, controller client QPS %.0f / burst %d (floor %.0f / %d). ",
		r.Params.RunDelay, r.Params.FinishDelay, r.Params.Nodes, r.Params.QPS, r.Params.Burst, r.Params.FloorQPS, r.Params.FloorBurst)
	if r.Params.Webhook {
		p("The executor's admission webhooks are installed, as config/default deploys them (its finalizer is added at creation). ")
	} else {
		p("No admission webhooks (the executor adds its finalizer with a patch). ")
	}
	if r.Params.FloorWebhook {
		p("The floor's creates go through the executor's admission webhooks too (`--floor-webhook`, served by `executor webhook` alone, counted as the floor's services). ")
	}
	if r.Params.FloorPod == floorPodExecutor {
		p("The floor creates the executor's own pod (`--floor-pod executor`: Flyte's environment and labels, default resources), not its minimal one. ")
	}
	p("%s", unrelatedText(r.Params.Unrelated))
	if r.Params.ExecutorSHA != "" {
		p("Executor binary %s (sha256 %s). ", r.Params.ExecutorBin, r.Params.ExecutorSHA)
	}
	p("Machine: %d CPUs (%s), %d GiB, Linux %s, %s, commit %s, load average at start %s.\n\n",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.MemoryKiB>>20, r.Machine.Kernel, r.Machine.GoVersion, short(r.Machine.Commit), r.Machine.LoadAvg)
	if len(r.Rounds) > 0 {
		round, median := medianRound(r.Rounds)
		p("## Rounds\n\n%d rounds, each a floor run and an executor run on fresh control planes, alternating which goes first; each round's executor is compared with that round's floor only. **Median ratio %.2f**; the table after this one is round %d's, the median round.\n\n", len(r.Rounds), median, round)
		p("| round | first | floor TaskActions/s | executor TaskActions/s | executor ÷ floor | CPU / TaskAction, executor ÷ floor: machine | controller | kube-apiserver |\n|---:|---|---:|---:|---:|---:|---:|---:|\n")
		for _, rr := range r.Rounds {
			p("| %d | %s | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f |\n", rr.Round, rr.First, rr.FloorPerSecond, rr.ExecutorPerSecond, rr.Ratio, rr.MachineCPURatio, rr.ControllerCPURatio, rr.APIServerCPURatio)
		}
		if len(r.Rounds)%2 == 1 {
			p("\n(An odd number of rounds: one controller went first once more than the other.)\n")
		}
		if q := quietText(r.Modes); q != "" {
			p("\n%s\n", q)
		}
		p("\n")
	}
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
			if v := f(m); math.IsNaN(v) {
				p(" n/a |")
			} else {
				p(" "+format+" |", v)
			}
		}
		if ratio {
			if d := f(fl); d != 0 && !math.IsNaN(d) && !math.IsNaN(f(ex)) {
				p(" %.2f |", f(ex)/d)
			} else {
				p(" – |")
			}
		}
		p("\n")
	}
	// opt is a row whose value a mode may not have by design (the floor's
	// Executing): "—" there, and no ratio.
	opt := func(name string, f func(*ModeResult) (float64, bool), format string) {
		p("| %s |", name)
		for _, m := range cols {
			if v, ok := f(m); ok {
				p(" "+format+" |", v)
			} else {
				p(" — |")
			}
		}
		if ratio {
			a, okA := f(fl)
			b, okB := f(ex)
			if okA && okB && a != 0 {
				p(" %.2f |", b/a)
			} else {
				p(" – |")
			}
		}
		p("\n")
	}
	executing := func(f func(*ExecutingStats) float64) func(*ModeResult) (float64, bool) {
		return func(m *ModeResult) (float64, bool) {
			if m.Executing == nil {
				return 0, false
			}
			return f(m.Executing), true
		}
	}
	seen := func(f func(*SeenWrites) float64) func(*ModeResult) (float64, bool) {
		return func(m *ModeResult) (float64, bool) {
			if m.SeenWritesSucceeded == nil {
				return 0, false
			}
			return f(m.SeenWritesSucceeded), true
		}
	}
	row("TaskActions ended (ok + failed)", func(m *ModeResult) float64 { return float64(m.Succeeded + m.Failed) }, "%.0f")
	row("failed (expected: fail fraction × N)", func(m *ModeResult) float64 { return float64(m.Failed) }, "%.0f")
	if r.Params.RetryFraction > 0 {
		row("retried (attempt 1 failed, attempt 2 succeeded)", func(m *ModeResult) float64 { return float64(m.Retried) }, "%.0f")
	}
	row("attempts (pods seen; expected)", func(m *ModeResult) float64 { return float64(m.Attempts) }, "%.0f")
	row("… expected", func(m *ModeResult) float64 { return float64(m.ExpectedAttempts) }, "%.0f")
	row("unexpected outcomes (status or attempts)", func(m *ModeResult) float64 { return float64(m.UnexpectedOutcomes) }, "%.0f")
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
	// No TaskAction seen Executing: no latency either, rather than 0.
	latency := func(f func(Percentiles) float64) func(*ModeResult) (float64, bool) {
		return func(m *ModeResult) (float64, bool) {
			if m.Executing == nil || m.Executing.PodRunningToExecutingMS.Count == 0 {
				return 0, false
			}
			return f(m.Executing.PodRunningToExecutingMS), true
		}
	}
	opt("pod running → TaskAction Executing p50 (ms)", latency(func(p Percentiles) float64 { return p.P50 }), "%.0f")
	opt("pod running → TaskAction Executing p99 (ms)", latency(func(p Percentiles) float64 { return p.P99 }), "%.0f")
	opt("TaskActions ended without showing Executing (straight from Queued)", executing(func(e *ExecutingStats) float64 { return float64(e.EndedWithoutExecuting) }), "%.0f")
	row("controller's own API requests / TaskAction", func(m *ModeResult) float64 { return m.Controller.TotalPerTA }, "%.2f")
	row("… of which non-2xx / TaskAction", func(m *ModeResult) float64 { return m.Controller.Non2xx / float64(m.N) }, "%.3f")
	row("… of which 409 conflicts / TaskAction", func(m *ModeResult) float64 { return m.Controller.Conflicts / float64(m.N) }, "%.3f")
	row("**controller's own writes / TaskAction**", func(m *ModeResult) float64 { return m.ControllerWrites.Writes }, "%.2f")
	row("… pod creates / TaskAction", func(m *ModeResult) float64 { return m.ControllerWrites.PodCreates }, "%.2f")
	row("… TaskAction status writes / TaskAction", func(m *ModeResult) float64 { return m.ControllerWrites.StatusWrites }, "%.2f")
	row("… TaskAction metadata writes (finalizer) / TaskAction", func(m *ModeResult) float64 { return m.ControllerWrites.MetadataWrites }, "%.2f")
	row("… other writes / TaskAction", func(m *ModeResult) float64 { return m.ControllerWrites.OtherWrites }, "%.2f")
	row("controller's own reads / TaskAction", func(m *ModeResult) float64 { return m.ControllerWrites.Reads }, "%.2f")
	opt("**writes / succeeded TaskAction, seen on the watches**", seen(func(w *SeenWrites) float64 { return w.Writes }), "%.2f")
	opt("… pods created / succeeded TaskAction", seen(func(w *SeenWrites) float64 { return w.PodsCreated }), "%.2f")
	opt("… TaskAction status updates / succeeded TaskAction", seen(func(w *SeenWrites) float64 { return w.StatusUpdates }), "%.2f")
	opt("… TaskAction metadata updates / succeeded TaskAction", seen(func(w *SeenWrites) float64 { return w.MetadataUpdates }), "%.2f")
	row("API server requests / TaskAction (everyone)", func(m *ModeResult) float64 { return m.APIServer.TotalPerTA }, "%.2f")
	row("… harness's own / TaskAction", func(m *ModeResult) float64 { return m.Harness.TotalPerTA }, "%.2f")
	row("… others (kube-scheduler, kwok) / TaskAction", func(m *ModeResult) float64 { return m.OtherRequestsPerTA }, "%.2f")
	row("controller's own API requests / attempt", func(m *ModeResult) float64 { return m.RequestsPerAttempt }, "%.2f")
	row("API server requests / attempt (everyone)", func(m *ModeResult) float64 { return m.APIServerRequestsPerAttempt }, "%.2f")
	row("kube-apiserver CPU (s)", func(m *ModeResult) float64 { return m.APIServerCPUSeconds }, "%.1f")
	row("**kube-apiserver CPU / TaskAction (ms)**", func(m *ModeResult) float64 { return m.APIServerCPUMsPerTA }, "%.1f")
	row("controller peak RSS (MiB)", func(m *ModeResult) float64 { return m.PeakRSSMiB }, "%.0f")
	row("controller CPU during the run (s)", func(m *ModeResult) float64 { return m.CPUSeconds }, "%.1f")
	row("**controller CPU / TaskAction (s)**", func(m *ModeResult) float64 { return m.CPUSecondsPerTA }, "%.4f")
	row("events + cache services CPU during the run (s)", func(m *ModeResult) float64 { return m.ServicesCPUSeconds }, "%.1f")
	row("harness CPU during the run (s)", func(m *ModeResult) float64 { return m.HarnessCPUSeconds }, "%.1f")
	row("whole machine CPU busy during the run (s)", func(m *ModeResult) float64 { return m.MachineCPUSeconds }, "%.1f")
	row("… share of the machine's CPUs (1 = CPU-bound)", func(m *ModeResult) float64 { return m.MachineBusy }, "%.2f")
	rl := func(f func(*RateLimiterStats) float64) func(*ModeResult) float64 {
		return func(m *ModeResult) float64 {
			if m.RateLimiter == nil || !m.RateLimiter.Exposed {
				return math.NaN()
			}
			return f(m.RateLimiter)
		}
	}
	row("client rate limiter: total wait (s)", rl(func(s *RateLimiterStats) float64 { return s.WaitSeconds }), "%.2f")
	row("client rate limiter: mean wait / request (ms)", rl(func(s *RateLimiterStats) float64 { return s.MeanWaitMS }), "%.2f")
	row("client rate limiter: requests waiting > 25 ms", rl(func(s *RateLimiterStats) float64 { return s.WaitsOver25ms }), "%.0f")
	row("controller error log lines", func(m *ModeResult) float64 { return float64(m.LogErrors) }, "%.0f")
	del := func(f func(*Deletion) float64) func(*ModeResult) float64 {
		return func(m *ModeResult) float64 {
			if m.Deletion == nil {
				return math.NaN()
			}
			return f(m.Deletion)
		}
	}
	if r.Params.GC {
		row("deletion: all TaskActions gone after (s)", del(func(d *Deletion) float64 { return d.Seconds }), "%.1f")
		row("deletion: TaskActions left", del(func(d *Deletion) float64 { return float64(d.Left) }), "%.0f")
		row("**deletion: deleter's requests / TaskAction**", del(func(d *Deletion) float64 { return d.RequestsPerTA }), "%.2f")
		row("… controller's own / TaskAction", del(func(d *Deletion) float64 { return d.Controller.TotalPerTA }), "%.2f")
		row("… harness's / TaskAction", del(func(d *Deletion) float64 { return d.Harness.TotalPerTA }), "%.2f")
		row("deletion: API server requests / TaskAction (everyone)", del(func(d *Deletion) float64 { return d.APIServer.TotalPerTA }), "%.2f")
		row("deletion: controller CPU (s)", del(func(d *Deletion) float64 { return d.ControllerCPUSeconds }), "%.2f")
		row("deletion: kube-apiserver CPU (s)", del(func(d *Deletion) float64 { return d.APIServerCPUSeconds }), "%.2f")
		row("deletion: pods left (no kube-controller-manager)", del(func(d *Deletion) float64 { return float64(d.PodsLeft) }), "%.0f")
	}
	p("%s", goalsText(r, fl, ex))
	if ex != nil && ex.Events != nil {
		p("\nEvents (executor only; the floor sends none): %d Record calls carrying %d events = **%.1f Record calls per 1,000 events**, %.2f events per TaskAction (%d failed calls; the events service's own counts).\n",
			ex.Events.RecordCalls, ex.Events.Events, ex.Events.RecordCallsPer1000Events, ex.Events.EventsPerTA, ex.Events.FailedCalls)
	}
	for _, m := range cols {
		p("\n## %s: own API requests per TaskAction (client side, `executor_api_requests_total`)\n\n", m.Mode)
		p("| verb resource code | count | per TaskAction |\n|---|---:|---:|\n")
		for _, rr := range m.Controller.Rows {
			p("| %s | %.0f | %.3f |\n", rr.Key, rr.Count, rr.PerTA)
		}
	}
	for _, m := range cols {
		if m.RateLimiter != nil && !m.RateLimiter.Exposed {
			p("\n%s does not serve `rest_client_rate_limiter_duration_seconds` (client-go's rate-limiter wait is opt-in in controller-runtime: `metrics.RegisterRESTClientMetrics(metrics.MetricRateLimiterLatency)`), so whether its client QPS bound it is not measured.\n", m.Mode)
		}
	}
	for _, m := range cols {
		if d := m.Deletion; d != nil {
			p("\n## %s: deletion phase, deleter's requests per TaskAction\n\nDeleted by %s.\n\n", m.Mode, d.By)
			p("| verb resource code | count | per TaskAction |\n|---|---:|---:|\n")
			for _, t := range []struct {
				who string
				t   RequestTable
			}{{"controller", d.Controller}, {"harness", d.Harness}} {
				for _, rr := range t.t.Rows {
					p("| %s: %s | %.0f | %.3f |\n", t.who, rr.Key, rr.Count, rr.PerTA)
				}
			}
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
	every := ""
	if len(r.Rounds) > 0 {
		every = ", one line per run of every round"
	}
	p("The chart: TaskActions terminal (y, 0 to N) against seconds since the first create (x); floor in blue, executor in red%s; grid lines every 10%% of N and at round seconds (the numbers on the axes are the maxima).\n", every)
	return b.String()
}

// Goals of the benchmark the report checks.
const (
	goalThroughputRatio = 0.7 // executor ÷ floor, TaskActions/s to terminal
	goalWrites          = 3   // writes per short successful TaskAction, with the webhook
)

// goalsText is the paragraph on the benchmark's goals: the throughput ratio
// (the median of --rounds) and, with the executor's webhooks installed, its
// writes per succeeded TaskAction, as its own counters and the watches give
// them. "" when neither can be judged.
func goalsText(r *Report, fl, ex *ModeResult) string {
	var parts []string
	if fl != nil && ex != nil && fl.TaskActionsPerSecond > 0 {
		ratio := ex.TaskActionsPerSecond / fl.TaskActionsPerSecond
		what := "executor ÷ floor"
		if len(r.Rounds) > 0 {
			_, ratio = medianRound(r.Rounds)
			what = "median executor ÷ floor"
		}
		parts = append(parts, fmt.Sprintf("throughput %s %.2f (goal ≥ %.1f: %s)", what, ratio, goalThroughputRatio, metText(ratio >= goalThroughputRatio)))
	}
	if ex != nil && r.Params.Webhook && ex.SeenWritesSucceeded != nil {
		own, seen := ex.ControllerWrites.Writes, ex.SeenWritesSucceeded.Writes
		// round3 leaves 3.000 for exactly three.
		met := own <= goalWrites && seen <= goalWrites
		parts = append(parts, fmt.Sprintf("the executor's writes %.2f per TaskAction (its own count, every outcome) and %.2f per succeeded TaskAction (seen on the watches), with the webhook, tasks of %s (goal ≤ %d per short successful TaskAction: %s)",
			own, seen, r.Params.FinishDelay, goalWrites, metText(met)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "\nGoals: " + strings.Join(parts, "; ") + ".\n"
}

func metText(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func workloadText(w string) string {
	switch w {
	case workloadFlyte:
		return "flyte (spec.taskTemplate: Flyte's serialized container task; file:// bucket storage)"
	case workloadRetries:
		return "retries (typed)"
	case "":
		return workloadTyped
	}
	return w + " (spec.template)"
}

// SearchMarkdown is the steady-rate search's table.
func (r *Report) SearchMarkdown() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	sp := r.SearchParams
	p("# Steady-rate search %s\n\n", r.Started.Format("2006-01-02 15:04 UTC"))
	p("`%s`\n\n", r.Command)
	p("Rates from %.1f/s, × %.2f per step, each held %s; a step passes when the harness created at ≥ 90%% of the rate and p99 create → TaskAction terminal ≤ %s (a TaskAction not ended by the last create + the bound counts as above it); the search stops at the first failing step or after %d steps. ",
		sp.StartRate, sp.Factor, sp.Step, sp.P99Bound, sp.MaxSteps)
	if sp.Refine > 0 {
		p("Then up to %d finer steps (marked \"finer\"), each at the geometric mean of the highest passing and the lowest failing rate, once every TaskAction created so far has ended. ", sp.Refine)
	}
	p("Each controller on its own fresh control plane. ")
	p("Workload %s, fail fraction %.2f, run delay %s, finish delay %s, %d kwok nodes, client QPS %.0f / burst %d (floor %.0f / %d). ",
		workloadText(r.Params.Workload), r.Params.FailFraction, r.Params.RunDelay, r.Params.FinishDelay, r.Params.Nodes, r.Params.QPS, r.Params.Burst, r.Params.FloorQPS, r.Params.FloorBurst)
	p("%s", unrelatedText(r.Params.Unrelated))
	p("Machine: %d CPUs (%s), Linux %s, commit %s, load average at start %s.\n\n", r.Machine.CPUs, r.Machine.CPUModel, r.Machine.Kernel, short(r.Machine.Commit), r.Machine.LoadAvg)
	p("| controller | **sustained rate (TaskActions/s)** | stopped because | peak RSS (MiB) |\n|---|---:|---|---:|\n")
	for _, s := range r.Search {
		why := "max steps reached"
		for _, st := range s.Steps { // the lowest failing rate
			if !st.Pass && (why == "max steps reached" || st.Refine) {
				why = fmt.Sprintf("%.1f/s: %s", st.Rate, st.Why)
			}
		}
		if s.Error != "" {
			why = "error: " + s.Error
		}
		p("| %s | %.1f | %s | %.0f |\n", s.Mode, s.SustainedRate, why, s.PeakRSSMiB)
	}
	for _, s := range r.Search {
		p("\n## %s\n\n| target rate (/s) | created | created at (/s) | ended | create → terminal p50 (ms) | p99 (ms) | controller CPU (s) | machine CPUs busy | |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|\n", s.Mode)
		for _, st := range s.Steps {
			finer := ""
			if st.Refine {
				finer = " (finer)"
			}
			p("| %.1f%s | %d | %.1f | %d | %.0f | %.0f | %.1f | %.2f | %s |\n", st.Rate, finer, st.Created, st.CreateRate, st.Ended,
				st.CreateToTerminalMS.P50, st.CreateToTerminalMS.P99, st.CPUSeconds, st.MachineBusy, passText(st))
		}
	}
	return b.String()
}

// unrelatedText is the header's sentence on --unrelated ("" without).
func unrelatedText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d unrelated TaskActions and %d unrelated pods in another namespace (%s), created before the controller started; both controllers scoped to the bench namespace %s (the executor's `--executor.namespaces`, the floor's `--namespace`). ",
		n, n, unrelatedNamespace, benchNamespace)
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

// quietText says how long the modes waited for a quiet machine before they
// started ("" if none waited).
func quietText(modes []*ModeResult) string {
	var waits []string
	notQuiet := 0
	for _, m := range modes {
		if m.Quiet == nil {
			continue
		}
		waits = append(waits, fmt.Sprintf("%.0f", m.Quiet.WaitSeconds))
		if m.Quiet.NotQuiet {
			notQuiet++
		}
	}
	if len(waits) == 0 {
		return ""
	}
	s := fmt.Sprintf("Before each run the harness waited for a quiet machine (busy share below %.2f for %d s in a row): %s s, in run order.", quietBusyShare, quietSeconds, strings.Join(waits, ", "))
	if notQuiet > 0 {
		s += fmt.Sprintf(" %d run(s) started after the %s bound without quiet.", notQuiet, quietMax)
	}
	return s
}
