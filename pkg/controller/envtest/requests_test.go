package envtest_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// runToSuccess creates n TaskActions, plays the kubelet for their pods
// (Running, then Succeeded) and returns the executor's API requests per
// TaskAction by "VERB resource code".
func runToSuccess(t testing.TB, n int) map[string]float64 {
	ns := namespace(t)
	before := counter.snapshot()
	for i := 0; i < n; i++ {
		create(t, validTaskAction(ns, fmt.Sprintf("req-%d", i)))
	}
	for i := 0; i < n; i++ {
		pod := waitPod(t, ns, fmt.Sprintf("req-%d-0", i))
		waitReason(t, ns, fmt.Sprintf("req-%d", i), flytev1.ConditionProgressing, flytev1.ReasonQueued)
		setPodStatus(t, pod, podRunning(pod))
	}
	for i := 0; i < n; i++ {
		waitReason(t, ns, fmt.Sprintf("req-%d", i), flytev1.ConditionProgressing, flytev1.ReasonExecuting)
		pod := waitPod(t, ns, fmt.Sprintf("req-%d-0", i))
		setPodStatus(t, pod, podTerminated(pod, corev1.PodSucceeded, 0, "Completed", ""))
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("req-%d", i)
		eventually(t, 20e9, name+" terminal and released", func() bool {
			ta := get(t, ns, name)
			return len(ta.Finalizers) == 0 && ta.Labels["flyte.org/termination-status"] == "terminated"
		})
	}
	after := counter.snapshot()
	per := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 && !strings.Contains(k, "events") {
			per[k] = float64(d) / float64(n)
		}
	}
	return per
}

// TestAPIRequestsPerTaskAction counts what one successful TaskAction costs the
// API server (Kubernetes Events excluded: a success emits none).
func TestAPIRequestsPerTaskAction(t *testing.T) {
	const n = 20
	per := runToSuccess(t, n)
	var keys []string
	reads, writes, conflicts := 0.0, 0.0, 0.0
	for k, v := range per {
		keys = append(keys, k)
		switch {
		case strings.HasPrefix(k, "GET") || strings.HasPrefix(k, "LIST"):
			reads += v
		default:
			writes += v
		}
		if strings.HasSuffix(k, " 409") {
			conflicts += v
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-40s %.2f per TaskAction", k, per[k])
	}
	t.Logf("per successful TaskAction: %.2f reads, %.2f writes, %.2f conflicts (n=%d)", reads, writes, conflicts, n)
	// finalizer, pod, Queued, Running, Succeeded status, terminal labels+finalizer release.
	if writes > 6 {
		t.Errorf("%.2f writes per TaskAction, want at most 6", writes)
	}
	if conflicts > 0 {
		t.Errorf("%.2f conflicts per TaskAction, want none", conflicts)
	}
	if reads > 0.5 {
		t.Errorf("%.2f reads per TaskAction: reconciles should read from the cache", reads)
	}
}

// BenchmarkTaskActionLifecycle drives b.N TaskActions from creation to
// Succeeded against the real API server and reports the executor's API
// requests per TaskAction. Run: make bench-controller.
func BenchmarkTaskActionLifecycle(b *testing.B) {
	n := max(b.N, 10)
	b.ResetTimer()
	per := runToSuccess(b, n)
	b.StopTimer()
	reads, writes := 0.0, 0.0
	for k, v := range per {
		if strings.HasPrefix(k, "GET") || strings.HasPrefix(k, "LIST") {
			reads += v
		} else {
			writes += v
		}
	}
	b.ReportMetric(reads, "reads/taskaction")
	b.ReportMetric(writes, "writes/taskaction")
	b.ReportMetric(per["PATCH taskactions/status 200"], "status-patches/taskaction")
}
