package eventsvc

import (
	"net/http"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// recordMetrics count the Record calls a Service answered and the events
// they carried, served at GET /metrics on its listener: an operator sees the
// load and the refusals without reading the store, and the benchmark counts
// the executor's events without a proxy in their path. Each Service has its
// own registry, so that several (tests, the local mode) live in one process.
type recordMetrics struct {
	reg    *prometheus.Registry
	calls  *prometheus.CounterVec
	events *prometheus.CounterVec
}

// The result label of events_service_events_total.
const (
	eventsStored    = "stored"    // new, now stored
	eventsDuplicate = "duplicate" // already stored (a resent batch) or repeated in the batch
	eventsRefused   = "refused"   // in a batch refused as invalid: none stored
	eventsFailed    = "failed"    // in a batch the store could not take
)

func newRecordMetrics() *recordMetrics {
	m := &recordMetrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "events_service_record_calls_total",
			Help: "Record calls answered, by Connect code (ok, invalid_argument, unavailable).",
		}, []string{"code"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "events_service_events_total",
			Help: "Events carried by Record calls, by result: stored, duplicate, refused (an invalid batch), failed (the store's error).",
		}, []string{"result"}),
	}
	m.reg.MustRegister(m.calls, m.events, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	for _, r := range []string{eventsStored, eventsDuplicate, eventsRefused, eventsFailed} {
		m.events.WithLabelValues(r)
	}
	return m
}

// record counts one Record call.
func (m *recordMetrics) record(err error, counts map[string]int) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	m.calls.WithLabelValues(code).Inc()
	for r, n := range counts {
		if n > 0 {
			m.events.WithLabelValues(r).Add(float64(n))
		}
	}
}

func (m *recordMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
