package metrics

import (
	"context"
	"net/url"
	"sync/atomic"
	"time"

	clientmetrics "k8s.io/client-go/tools/metrics"
)

// Thresholds of API pressure. A token at hand is taken in microseconds; a
// write the API server is not short of CPU or etcd for answers in tens of
// milliseconds.
const (
	throttledWait = 10 * time.Millisecond
	slowWrite     = 200 * time.Millisecond
)

// lastPressure is when a request last waited for the API client's own rate
// limiter (kubeAPIQPS/kubeAPIBurst) or a write was last answered slowly, in
// Unix nanoseconds.
var lastPressure atomic.Int64

func pressed() { lastPressure.Store(time.Now().UnixNano()) }

// throttleObserver sees every request's rate-limiter wait on its way to the
// metric controller-runtime registered (rest_client_rate_limiter_duration_seconds).
type throttleObserver struct{ next clientmetrics.LatencyMetric }

func (o throttleObserver) Observe(ctx context.Context, verb string, u url.URL, latency time.Duration) {
	if latency >= throttledWait {
		pressed()
	}
	o.next.Observe(ctx, verb, u, latency)
}

// observeWrite notes how long the API server took to answer a write
// (InstrumentRESTConfig's round tripper).
func observeWrite(took time.Duration) {
	if took >= slowWrite {
		pressed()
	}
}

// APIPressureWithin says whether, within the last d, a request to the API
// server waited for the client's own rate limiter or a write took the API
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
