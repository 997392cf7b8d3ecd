package metrics

import (
	"context"
	"net/url"
	"testing"
	"time"

	clientmetrics "k8s.io/client-go/tools/metrics"
)

// TestAPIPressure: client-go's rate-limiter observation (the variable it
// reads on every request) goes through the executor's observer, which
// remembers a wait long enough to count, and not a token taken at once; a
// slow average of writes counts, quick writes and a single slower one do
// not.
func TestAPIPressure(t *testing.T) {
	lastPressure.Store(0)
	clientmetrics.RateLimiterLatency.Observe(context.Background(), "PATCH", url.URL{Path: "/apis/flyte.org/v1"}, 50*time.Microsecond)
	if APIPressureWithin(time.Minute) {
		t.Fatal("a request that took a token at once counts as throttled")
	}
	clientmetrics.RateLimiterLatency.Observe(context.Background(), "PATCH", url.URL{Path: "/apis/flyte.org/v1"}, 200*time.Millisecond)
	if !APIPressureWithin(time.Minute) {
		t.Fatal("a request that waited 200ms for the rate limiter is not seen")
	}
	if APIPressureWithin(0) {
		t.Fatal("throttled within no time at all")
	}
	lastPressure.Store(0)
	meanWrite.Store(0)
	for range 100 {
		observeWrite(20 * time.Millisecond)
	}
	if APIPressureWithin(time.Minute) {
		t.Fatal("writes answered in 20ms count as pressure")
	}
	observeWrite(100 * time.Millisecond)
	if APIPressureWithin(time.Minute) {
		t.Fatal("one write answered in 100ms among quick ones counts as pressure")
	}
	for range 20 {
		observeWrite(80 * time.Millisecond)
	}
	if !APIPressureWithin(time.Minute) {
		t.Fatal("writes answered in 80ms on average are not seen")
	}
	for range 100 {
		observeWrite(10 * time.Millisecond)
	}
	lastPressure.Store(0)
	observeWrite(10 * time.Millisecond)
	if APIPressureWithin(time.Minute) {
		t.Fatal("the average does not come down with quick writes")
	}
	observeWrite(2 * time.Second)
	if !APIPressureWithin(time.Minute) {
		t.Fatal("a write answered in 2s is not seen")
	}
}
