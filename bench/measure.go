package main

import (
	"math"
	"sort"
	"time"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// fillRequests puts the request tables of the hot path into res.
func (res *ModeResult) fillRequests(o options, before, after snapshot) {
	res.APIServer = requestTable(delta(counters(after.api, "apiserver_request_total", apiserverKey), counters(before.api, "apiserver_request_total", apiserverKey)), o.N)
	res.APIServerCPUSeconds = value(after.api, "process_cpu_seconds_total") - value(before.api, "process_cpu_seconds_total")
	res.Controller = requestTable(delta(counters(after.ctrl, "executor_api_requests_total", clientKey), counters(before.ctrl, "executor_api_requests_total", clientKey)), o.N)
	res.ControllerWrites = writeSplit(res.Controller, o.N)
	res.Harness = requestTable(delta(after.harness, before.harness), o.N)
	res.OtherRequestsPerTA = res.APIServer.TotalPerTA - res.Controller.TotalPerTA - res.Harness.TotalPerTA
	if res.Attempts > 0 {
		res.RequestsPerAttempt = round3(res.Controller.Total / float64(res.Attempts))
		res.APIServerRequestsPerAttempt = round3(res.APIServer.Total / float64(res.Attempts))
	}
}

// controllerMetrics are the controller's own counters of interest, as deltas.
func controllerMetrics(before, after []sample) map[string]float64 {
	out := map[string]float64{}
	transition := func(l map[string]string) string { return "transitions " + l["phase"] + " " + l["outcome"] }
	for k, v := range delta(counters(after, "executor_taskaction_transitions_total", transition), counters(before, "executor_taskaction_transitions_total", transition)) {
		out[k] = v
	}
	for _, name := range []string{"executor_taskaction_attempts_total", "executor_taskaction_retries_total", "executor_event_batch_events_count", "executor_event_batch_events_sum",
		"executor_event_batch_failures_total", "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
		"executor_event_batch_duration_seconds_sum", "executor_event_batch_duration_seconds_count",
		"executor_taskaction_terminal_latency_seconds_sum", "executor_taskaction_terminal_latency_seconds_count",
		"executor_taskaction_launch_latency_seconds_sum", "executor_taskaction_launch_latency_seconds_count",
		"controller_runtime_reconcile_time_seconds_sum", "controller_runtime_reconcile_time_seconds_count",
		"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count", "workqueue_retries_total",
		"executor_api_request_duration_seconds_sum", "executor_api_request_duration_seconds_count",
		"executor_gc_deleted_total",
		"rest_client_rate_limiter_duration_seconds_sum", "rest_client_rate_limiter_duration_seconds_count"} {
		if d := value(after, name) - value(before, name); d != 0 {
			out[name] = d
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// rateLimiterStats is the time the controller's requests waited on
// client-go's client-side rate limiter (--qps/--burst), from
// rest_client_rate_limiter_duration_seconds, which controller-runtime serves
// only when the process enabled it; nil when the controller does not expose it.
func rateLimiterStats(before, after []sample, requests float64) *RateLimiterStats {
	const name = "rest_client_rate_limiter_duration_seconds"
	if !has(after, name+"_count") {
		return &RateLimiterStats{Exposed: false}
	}
	st := &RateLimiterStats{Exposed: true,
		WaitSeconds: round3(value(after, name+"_sum") - value(before, name+"_sum")),
		Waits:       value(after, name+"_count") - value(before, name+"_count")}
	if st.Waits > 0 {
		st.MeanWaitMS = round3(1000 * st.WaitSeconds / st.Waits)
	}
	// Requests that waited longer than 25 ms: above the histogram's second bucket.
	st.WaitsOver25ms = st.Waits - (bucket(after, name, "0.025") - bucket(before, name, "0.025"))
	if requests > 0 {
		st.WaitMSPerRequest = round3(1000 * st.WaitSeconds / requests)
	}
	return st
}

func harnessCounts() map[string]float64 {
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "executor_api_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[clientKey(l)] += m.GetCounter().GetValue()
		}
	}
	return out
}

// fill computes the latencies and the throughput from the observations.
func (res *ModeResult) fill(o options, ob *observer, start, end time.Time) {
	var toPod, podToTA, e2e, toExecuting []float64
	var ok, failed seenWriteSums
	executingFirst := 0
	first, last := start, start
	for _, r := range ob.recs {
		if r.created.IsZero() {
			continue
		}
		if d, early, seen := executingMS(r); seen {
			toExecuting = append(toExecuting, d)
			if early {
				executingFirst++
			}
		}
		if !r.taTerminal.IsZero() {
			if r.failed {
				failed.add(r)
			} else {
				ok.add(r)
			}
		}
		if !r.podCreated.IsZero() {
			toPod = append(toPod, ms(r.podCreated.Sub(r.created)))
		}
		res.Attempts += r.pods
		res.ExpectedAttempts += r.want.attempts()
		if !r.taTerminal.IsZero() {
			if r.failed {
				res.Failed++
			} else {
				res.Succeeded++
			}
			if r.failed != r.want.fail || r.pods != r.want.attempts() {
				res.UnexpectedOutcomes++
			}
			if r.want.retry {
				res.Retried++
			}
			e2e = append(e2e, ms(r.taTerminal.Sub(r.created)))
			if !r.podTerminal.IsZero() {
				podToTA = append(podToTA, ms(r.taTerminal.Sub(r.podTerminal)))
			}
			if r.taTerminal.After(last) {
				last = r.taTerminal
			}
		}
	}
	_ = first
	res.Unfinished = o.N - res.Succeeded - res.Failed
	res.WallSeconds = last.Sub(start).Seconds()
	if res.WallSeconds > 0 {
		res.TaskActionsPerSecond = float64(res.Succeeded+res.Failed) / res.WallSeconds
	}
	res.CreateToPodMS = percentiles(toPod)
	res.PodTerminalToTerminalMS = percentiles(podToTA)
	res.CreateToTerminalMS = percentiles(e2e)
	res.SeenWritesSucceeded, res.SeenWritesFailed = ok.perTaskAction(), failed.perTaskAction()
	// The floor writes no Executing by design: nothing to measure there.
	if res.Mode != "floor" {
		never := 0
		for _, r := range ob.recs {
			if !r.created.IsZero() && !r.taTerminal.IsZero() && r.executing.IsZero() {
				never++
			}
		}
		res.Executing = &ExecutingStats{PodRunningToExecutingMS: percentiles(toExecuting), EndedWithoutExecuting: never, SeenBeforePodRunning: executingFirst}
	}
	sort.Slice(ob.done, func(i, j int) bool { return ob.done[i].Before(ob.done[j]) })
	for _, t := range ob.done {
		res.Completions = append(res.Completions, math.Round(t.Sub(start).Seconds()*1000)/1000)
	}
	_ = end
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// executingMS is the time from the pod's running start to the TaskAction's
// first Executing, for the attempt running then: the last of its pods to
// have turned Running by that moment. early: the harness saw Executing
// before it saw any pod Running (its two watches are not ordered with each
// other), counted as 0. seen is false without Executing or a running pod.
func executingMS(r *record) (d float64, early, seen bool) {
	if r.executing.IsZero() || len(r.running) == 0 {
		return 0, false, false
	}
	from := r.running[0]
	for _, t := range r.running[1:] {
		if !t.After(r.executing) {
			from = t
		}
	}
	if r.executing.Before(from) {
		return 0, true, true
	}
	return ms(r.executing.Sub(from)), false, true
}

// seenWriteSums adds up the writes the harness's watches saw of TaskActions
// of one outcome: their pods (each a create) and their updates.
type seenWriteSums struct{ n, pods, status, meta int }

func (s *seenWriteSums) add(r *record) {
	s.n++
	s.pods += r.pods
	s.status += r.statusUpdates
	s.meta += r.metaUpdates
}

// perTaskAction is the sums per TaskAction; nil for none.
func (s seenWriteSums) perTaskAction() *SeenWrites {
	if s.n == 0 {
		return nil
	}
	per := func(v int) float64 { return round3(float64(v) / float64(s.n)) }
	return &SeenWrites{TaskActions: s.n, PodsCreated: per(s.pods), StatusUpdates: per(s.status), MetadataUpdates: per(s.meta),
		Writes: per(s.pods + s.status + s.meta)}
}

func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	sort.Float64s(v)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(v)))) - 1
		return math.Round(v[max(0, min(i, len(v)-1))])
	}
	return Percentiles{Count: len(v), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: math.Round(v[len(v)-1])}
}
