package metrics

import (
	"context"
	"net/url"
	"sync/atomic"
	"time"

	clientmetrics "k8s.io/client-go/tools/metrics"
)

// Thresholds of API pressure. A token at hand is taken in microseconds. An
// API server with CPU and etcd to spare answers a write in a few tens of
// milliseconds; one that is short of them answers most writes in tens to
// hundreds (measured on the bench rig at QPS 1000: status patches 67 ms on
// average, pod creates 90 ms, against 5–20 ms unloaded). The average, not a
// single slow write, counts: one write can wait on an etcd compaction.
const (
	throttledWait = 10 * time.Millisecond
	slowWrites    = 50 * time.Millisecond
	// writeWeight is the weight of the newest write in the moving average
	// (1/writeWeight): it follows the last few dozen writes.
	writeWeight = 8
)

// lastPressure is when a request last waited for the API client's own rate
// limiter (kubeAPIQPS/kubeAPIBurst) or writes were last answered slowly on
// average, in Unix nanoseconds.
var lastPressure atomic.Int64

// NotePressure records pressure now; the controller notes its own
// saturation (TaskActions waiting in the work queue) here too, so that it is
// remembered as long.
func NotePressure() { lastPressure.Store(time.Now().UnixNano()) }

// throttleObserver sees every request's rate-limiter wait on its way to the
// metric controller-runtime registered (rest_client_rate_limiter_duration_seconds).
type throttleObserver struct{ next clientmetrics.LatencyMetric }

func (o throttleObserver) Observe(ctx context.Context, verb string, u url.URL, latency time.Duration) {
	if latency >= throttledWait {
		NotePressure()
	}
	o.next.Observe(ctx, verb, u, latency)
}

// meanWrite is a moving average of how long the API server took to answer
// this process's writes, in nanoseconds.
var meanWrite atomic.Int64

// observeWrite notes how long the API server took to answer a write
// (InstrumentRESTConfig's round tripper).
func observeWrite(took time.Duration) {
	for {
		old := meanWrite.Load()
		mean := old + (int64(took)-old)/writeWeight
		if meanWrite.CompareAndSwap(old, mean) {
			if time.Duration(mean) >= slowWrites {
				NotePressure()
			}
			return
		}
	}
}

// APIPressureWithin says whether, within the last d, a request to the API
// server waited for the client's own rate limiter or writes took the API
// server long to answer: then every write the executor saves lets another
// through sooner.
func APIPressureWithin(d time.Duration) bool {
	t := lastPressure.Load()
	return t != 0 && time.Since(time.Unix(0, t)) < d
}

func init() {
	// After controller-runtime's registration (its package initialises
	// first): client-go reads this variable on every request.
	clientmetrics.RateLimiterLatency = throttleObserver{next: clientmetrics.RateLimiterLatency}
}
