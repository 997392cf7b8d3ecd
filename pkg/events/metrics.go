package events

import "github.com/prometheus/client_golang/prometheus"

// Batch sizes, latencies and failures are histograms and a counter in
// pkg/metrics; these are the batcher's own counters.
// The Batcher is a prometheus.Collector, so that operators see delivery
// trouble before reconciles pile up: register it, e.g. with controller-runtime's
// metrics.Registry.MustRegister(batcher).
var (
	descCalls     = prometheus.NewDesc("executor_events_record_calls_total", "Record calls to the events service, retries included.", nil, nil)
	descBatches   = prometheus.NewDesc("executor_events_batches_total", "Batches sent to the events service.", nil, nil)
	descEvents    = prometheus.NewDesc("executor_events_acknowledged_total", "Events the events service acknowledged.", nil, nil)
	descRetries   = prometheus.NewDesc("executor_events_retries_total", "Record calls retried after a transient error.", nil, nil)
	descAbandoned = prometheus.NewDesc("executor_events_abandoned_total", "Events dropped unsent because their caller had gone.", nil, nil)
	descQueue     = prometheus.NewDesc("executor_events_queue_length", "Events waiting for a batch.", nil, nil)
)

var _ prometheus.Collector = (*Batcher)(nil)

// Describe implements prometheus.Collector.
func (b *Batcher) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCalls, descBatches, descEvents, descRetries, descAbandoned, descQueue} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (b *Batcher) Collect(ch chan<- prometheus.Metric) {
	st := b.Stats()
	for _, c := range []struct {
		d *prometheus.Desc
		v uint64
	}{
		{descCalls, st.Calls}, {descBatches, st.Batches}, {descEvents, st.Events},
		{descRetries, st.Retries}, {descAbandoned, st.Abandoned},
	} {
		ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.v))
	}
	ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(len(b.queue)))
}
