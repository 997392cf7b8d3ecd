package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/cachesvc/cachesvctest"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
)

// TestMetricsScrape produces a success, a retry, a system failure, a cache miss
// and a garbage collection, then scrapes the executor's secure /metrics with a
// service account token and finds each metric with those values.
func TestMetricsScrape(t *testing.T) {
	ev := eventsvctest.Start(t, eventsvctest.Options{})
	cs := cachesvctest.Start(t, cachesvctest.Options{})
	ns := namespace(t)
	port := freePort(t)
	startExecutorWith(t, ns, ev.URL, cs.URL, func(c *config.Config) {
		c.MetricsBindAddress = fmt.Sprintf("127.0.0.1:%d", port)
		c.MetricsSecure = true
		c.GC = config.GCConfig{Interval: config.Duration{Duration: time.Second}, MaxTTL: config.Duration{Duration: time.Second}}
	})
	clientset, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := testenv.ServiceAccountToken(t, clientset, ns, "scraper", true)

	// A success with a cache miss.
	create(t, cached(taskAction(ns, ns, "m-ok"), "k-metrics", false))
	pod := waitPod(t, ns, "m-ok-0")
	kubelet(t, pod, corev1.PodRunning, 0)
	waitReason(t, ns, "m-ok", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	kubelet(t, pod, corev1.PodSucceeded, 0)
	waitReason(t, ns, "m-ok", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	// A retry, after a system failure (the pod deleted by someone else).
	ta := taskAction(ns, ns, "m-retry")
	ta.Spec.Template.Retries = 1
	create(t, ta)
	pod = waitPod(t, ns, "m-retry-0")
	if err := k8s.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "system failure counted", func() bool { return get(t, ns, "m-retry").Status.SystemFailures == 1 })
	pod = waitPod(t, ns, "m-retry-0")
	kubelet(t, pod, corev1.PodFailed, 1)
	pod = waitPod(t, ns, "m-retry-1")
	kubelet(t, pod, corev1.PodSucceeded, 0)
	waitReason(t, ns, "m-retry", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	// The GC deletes both once their TTL has passed.
	eventually(t, 20*time.Second, "garbage collection", func() bool { return gone(t, ns, "m-ok") && gone(t, ns, "m-retry") })

	// One that stays queued, for the gauge of TaskActions by phase.
	create(t, taskAction(ns, ns, "m-queued"))
	waitReason(t, ns, "m-queued", flytev1.ConditionProgressing, flytev1.ReasonQueued)

	body := scrape(t, port, token)
	for _, want := range []struct {
		series string
		min    float64
	}{
		{`executor_taskaction_transitions_total{outcome="ok",phase="Completed"}`, 2},
		{`executor_taskaction_transitions_total{outcome="ok",phase="Executing"}`, 1},
		{`executor_taskaction_transitions_total{outcome="ok",phase="RetryableFailure"}`, 1},
		{`executor_taskaction_attempts_total`, 4},
		{`executor_taskaction_retries_total`, 1},
		{`executor_taskaction_system_failures_total{code="ResourceDeletedExternally"}`, 1},
		{`executor_taskaction_launch_latency_seconds_count`, 2},
		{`executor_taskaction_terminal_latency_seconds_count`, 2},
		{`executor_event_batch_events_count`, 1},
		{`executor_event_batch_duration_seconds_count`, 1},
		{`executor_events_acknowledged_total`, 8},
		{`executor_cache_lookups_total{result="miss"}`, 1},
		{`executor_gc_deletions_total{outcome="deleted"}`, 2},
		{`executor_gc_sweep_duration_seconds_count{result="success"}`, 1},
		{`executor_api_requests_total{code="201",resource="pods",verb="create"}`, 3},
		{`executor_api_requests_total{code="200",resource="taskactions.flyte.org/status",verb="patch"}`, 6},
		{`executor_api_request_duration_seconds_count{resource="pods",verb="create"}`, 3},
		{`controller_runtime_reconcile_total{controller="taskaction",result="success"}`, 1},
		{`executor_taskactions{phase="Queued"}`, 1},
	} {
		got, ok := sample(body, want.series)
		if !ok {
			t.Errorf("%s missing from /metrics", want.series)
			continue
		}
		if got < want.min {
			t.Errorf("%s = %v, want at least %v", want.series, got, want.min)
		}
	}
}

func gone(t testing.TB, ns, name string) bool {
	ta := &flytev1.TaskAction{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ta)
	return err != nil
}

func scrape(t testing.TB, port int, token string) string {
	t.Helper()
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	var resp *http.Response
	var err error
	eventually(t, 20*time.Second, "metrics server", func() bool {
		resp, err = cl.Do(req)
		return err == nil
	})
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics with a reader token: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// sample finds the value of one series ("name{labels}" with labels in the
// exposition's sorted order) in a Prometheus text exposition.
func sample(body, series string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
