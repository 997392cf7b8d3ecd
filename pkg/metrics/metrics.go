// Package metrics holds the executor's Prometheus metrics. They register into
// controller-runtime's registry, so the manager's metrics endpoint serves them
// next to controller_runtime_*, workqueue_* and rest_client_*.
//
// The functions here are what the reconciler, the events batcher and the
// garbage collector call; they are safe for concurrent use and cheap.
package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// Namespace prefixes every metric of the executor.
const Namespace = "executor"

// Outcomes of a recorded transition (Transition).
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
)

// Outcomes of one garbage-collector deletion (GCDeletion).
const (
	GCDeleted     = "deleted"      // the DELETE was accepted
	GCAlreadyGone = "already_gone" // NotFound: someone else deleted it first
	GCRecreated   = "recreated"    // UID precondition failed: the name now holds a new object, kept
	GCFailed      = "failed"       // any other error; retried on the next sweep
)

// LabelOther stands for every value outside a label's known set. A label
// fed by text the executor does not choose (the error code of a task's
// error.pb, a condition reason written by another client) would otherwise
// add a series for each distinct value, without bound.
const LabelOther = "other"

// SystemFailureCodes are the codes executor_taskaction_system_failures_total
// names as they are: the system failures the executor and its pod plugin
// tell apart. Any other code is counted as LabelOther.
var SystemFailureCodes = []string{
	"SystemError",               // an API error launching or reading the attempt
	"StorageError",              // blob storage could not be read (inputs, error.pb)
	"ResourceDeletedExternally", // the pod was deleted by someone else, or is gone
	"UnknownError",              // a pod failure nothing explains
	"Evicted",
	"Interrupted", // node shutdown, preemption, API eviction
	"NodeAffinity",
	"NodeLost",
	"UnexpectedAdmissionError",
	"OutOfcpu", "OutOfmemory", "OutOfpods", "OutOfephemeral-storage", // the kubelet refused the pod
}

var systemFailureCodes = setOf(SystemFailureCodes...)

// phaseNames are the phases executor_taskactions and
// executor_taskaction_transitions_total name: the TaskAction condition
// reasons (which are also the phase-history names) and PhaseUnknown.
var phaseNames = setOf(
	flytev1.ReasonQueued, flytev1.ReasonInitializing, flytev1.ReasonExecuting, flytev1.ReasonCompleted,
	flytev1.ReasonRetryableFailure, flytev1.ReasonPermanentFailure, flytev1.ReasonAborted,
	flytev1.ReasonPluginNotFound, flytev1.ReasonInvalidSpec, flytev1.ReasonTimedOut,
	flytev1.ReasonPaused, flytev1.ReasonSignaled, PhaseUnknown,
)

func setOf(vs ...string) map[string]bool {
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m
}

// bounded is v if known holds it, else LabelOther.
func bounded(known map[string]bool, v string) string {
	if known[v] {
		return v
	}
	return LabelOther
}

// latencyBuckets span a fast local launch to a long image pull.
var latencyBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

var (
	transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "taskaction_transitions_total",
		Help: "Phase transitions of TaskActions the reconciler recorded, by phase (a TaskAction reason, else \"other\") and outcome (ok, error).",
	}, []string{"phase", "outcome"})

	attempts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "taskaction_attempts_total",
		Help: "Attempt pods launched, relaunches after system failures included.",
	})

	retries = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "taskaction_retries_total",
		Help: "User retries: a failed attempt followed by a new attempt.",
	})

	systemFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "taskaction_system_failures_total",
		Help: "System failures of attempts, by error code (a known code, else \"other\").",
	}, []string{"code"})

	quotaRefusals = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "taskaction_quota_refusals_total",
		Help: "Pod creates refused for exceeding a resource quota; the attempt waits with backoff and no user attempt is consumed.",
	})

	launchLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "taskaction_launch_latency_seconds",
		Help:    "Time from a TaskAction's creation to the launch of its first pod.",
		Buckets: latencyBuckets,
	})

	terminalLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "taskaction_terminal_latency_seconds",
		Help:    "Time from the end of a TaskAction's last pod (when its primary container finished) to its terminal status being written.",
		Buckets: latencyBuckets,
	})

	eventBatchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "event_batch_events",
		Help:    "Events per batch sent to the events service.",
		Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
	})

	eventBatchLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "event_batch_duration_seconds",
		Help:    "Time to make one batch durable at the events service, retries included.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	})

	eventBatchFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "event_batch_failures_total",
		Help: "Event batches whose callers got an error.",
	})

	cacheLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "cache_lookups_total",
		Help: "Task-output cache lookups, by result (the lower-cased cache status: hit, miss, lookup_failure, ...).",
	}, []string{"result"})

	gcDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "gc_deletions_total",
		Help: "Garbage-collector deletions of terminal TaskActions, by outcome (deleted, already_gone, recreated, failed).",
	}, []string{"outcome"})

	gcSweepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "gc_sweep_duration_seconds",
		Help:    "Duration of one garbage-collector sweep, by result (success, or error when listing failed and the sweep ended early).",
		Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800},
	}, []string{"result"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(
		transitions, attempts, retries, systemFailures, quotaRefusals, launchLatency, terminalLatency,
		eventBatchSize, eventBatchLatency, eventBatchFailures, cacheLookups,
		gcDeletions, gcSweepDuration,
		apiRequests, apiRequestDuration,
	)
	// How long requests waited for the client's own QPS budget
	// (rest_client_rate_limiter_duration_seconds): whether kubeAPIQPS is what
	// bounds the executor.
	ctrlmetrics.RegisterRESTClientMetrics(ctrlmetrics.MetricRateLimiterLatency)
}

// Transition counts one phase transition the reconciler recorded. phase is
// the phaseHistory name (Queued, Executing, Completed, ...; any other is
// counted as LabelOther); outcome is OutcomeOK when its event and status were
// written, OutcomeError otherwise.
func Transition(phase, outcome string) {
	transitions.WithLabelValues(bounded(phaseNames, phase), outcome).Inc()
}

// Attempt counts one attempt pod launched.
func Attempt() { attempts.Inc() }

// Retry counts one user retry (a new attempt after a retryable failure).
func Retry() { retries.Inc() }

// SystemFailure counts one system failure with its error code: one of
// SystemFailureCodes, else LabelOther (a code from a task's error.pb or a
// kubelet reason of an unusual resource).
func SystemFailure(code string) {
	systemFailures.WithLabelValues(bounded(systemFailureCodes, code)).Inc()
}

// QuotaRefusal counts a pod create refused by a resource quota.
func QuotaRefusal() { quotaRefusals.Inc() }

// ObserveLaunchLatency records the time from creation to the first pod launch.
func ObserveLaunchLatency(d time.Duration) { launchLatency.Observe(seconds(d)) }

// ObserveTerminalLatency records the time from the last pod's end to the
// terminal status.
func ObserveTerminalLatency(d time.Duration) { terminalLatency.Observe(seconds(d)) }

// EventBatch records one batch sent to the events service: its size, how
// long it took (retries included) and whether its callers got an error.
func EventBatch(size int, latency time.Duration, err error) {
	eventBatchSize.Observe(float64(size))
	eventBatchLatency.Observe(seconds(latency))
	if err != nil {
		eventBatchFailures.Inc()
	}
}

// CacheLookup counts one task-output cache lookup. result is lower-cased so
// that the CacheStatus values (HIT, MISS, ...) can be passed as they are.
func CacheLookup(result string) { cacheLookups.WithLabelValues(strings.ToLower(result)).Inc() }

// GCDeletion counts one deletion attempt of the garbage collector; outcome is
// one of GCDeleted, GCAlreadyGone, GCRecreated, GCFailed.
func GCDeletion(outcome string) { gcDeletions.WithLabelValues(outcome).Inc() }

// ObserveGCSweep records one sweep; err is the error that ended it early.
func ObserveGCSweep(d time.Duration, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	gcSweepDuration.WithLabelValues(result).Observe(seconds(d))
}

// seconds clamps negative durations (clock steps) to zero: a histogram of
// latencies has no use for them.
func seconds(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return d.Seconds()
}
