package metrics

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// PhaseUnknown is the phase of a TaskAction without conditions: one the
// reconciler has not seen yet.
const PhaseUnknown = "Unknown"

// collectTimeout bounds the cache read of one scrape; a cache that has not
// synced yet would otherwise hold the scrape until the scraper gives up.
const collectTimeout = 5 * time.Second

var phaseDesc = prometheus.NewDesc(Namespace+"_taskactions",
	"TaskActions in the informer cache, by phase (the Succeeded or Failed reason when terminal, else the Progressing reason; \"other\" for a reason that is not the executor's).",
	[]string{"phase"}, nil)

// phaseCollector counts TaskActions by phase at scrape time, so the numbers
// cannot drift from the cache the way an incremented gauge would.
type phaseCollector struct {
	reader atomic.Pointer[client.Reader]
}

var (
	phases         = &phaseCollector{}
	registerPhases sync.Once
	registerErr    error
)

// RegisterPhaseGauge makes executor_taskactions count the TaskActions that r
// holds. r should be the manager's cache (mgr.GetCache()): the count is read
// from it on every scrape without copying the objects. Calling it again (a new
// manager in the same process) only switches the reader.
func RegisterPhaseGauge(r client.Reader) error {
	phases.reader.Store(&r)
	registerPhases.Do(func() { registerErr = ctrlmetrics.Registry.Register(phases) })
	return registerErr
}

func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- phaseDesc }

func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	rp := c.reader.Load()
	if rp == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	list := &flytev1.TaskActionList{}
	// The objects are the cache's own: only read here, never kept or changed.
	if err := (*rp).List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		// An invalid metric would fail the whole scrape (the metrics server
		// uses HTTPErrorOnError); losing one gauge for one scrape is better.
		var notStarted *cache.ErrCacheNotStarted
		if !errors.As(err, &notStarted) {
			logf.Log.WithName("metrics").Error(err, "counting TaskActions by phase")
		}
		return
	}
	counts := map[string]int{}
	for i := range list.Items {
		counts[Phase(&list.Items[i])]++
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, float64(n), phase)
	}
}

// Phase is the phase a TaskAction is counted under: the reason of its
// Succeeded or Failed condition when terminal, else of its Progressing
// condition. A reason that is not one of the executor's (another client may
// write the status) is LabelOther, so that the gauge's series stay bounded.
func Phase(ta *flytev1.TaskAction) string {
	conds := ta.Status.Conditions
	for _, typ := range []string{flytev1.ConditionSucceeded, flytev1.ConditionFailed} {
		if c := meta.FindStatusCondition(conds, typ); c != nil && c.Status == metav1.ConditionTrue && c.Reason != "" {
			return bounded(phaseNames, c.Reason)
		}
	}
	if c := meta.FindStatusCondition(conds, flytev1.ConditionProgressing); c != nil && c.Reason != "" {
		return bounded(phaseNames, c.Reason)
	}
	return PhaseUnknown
}
