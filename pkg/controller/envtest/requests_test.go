package envtest_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
)

// runToSuccess creates n TaskActions, plays the kubelet for their pods
// (Running, then Succeeded) and returns the executor's API requests per
// TaskAction by "VERB resource code".
// lifeCost is what TaskActions cost the API server in the executor's requests
// (request key → requests per TaskAction): from creation to the end, and for
// the deletion after it (as the garbage collector's DELETE, which is not
// counted here, starts it).
type lifeCost struct {
	ns            string
	run, deletion map[string]float64
	// reconciles per TaskAction from creation to the end.
	reconciles float64
}

func reconciles(t testing.TB) float64 {
	return testenv.CounterTotal(t, "controller_runtime_reconcile_total", map[string]string{"controller": "taskaction"})
}

func runToSuccess(t testing.TB, n int, admitted bool) lifeCost {
	ns := namespace(t)
	before, reconciled := counter.snapshot(), reconciles(t)
	for i := 0; i < n; i++ {
		ta := validTaskAction(ns, fmt.Sprintf("req-%d", i))
		if admitted {
			ta.Finalizers = []string{flytev1.Finalizer} // as the admission webhook adds it
		}
		create(t, ta)
	}
	for i := 0; i < n; i++ {
		pod := waitPod(t, ns, fmt.Sprintf("req-%d-0", i))
		setPodStatus(t, pod, podRunning(pod))
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("req-%d", i)
		eventually(t, 20*time.Second, name+" RUNNING reported", func() bool {
			return strings.Contains(phasesOf(eventsOf(ns, name)), "1:RUNNING")
		})
		pod := waitPod(t, ns, fmt.Sprintf("req-%d-0", i))
		setPodStatus(t, pod, podTerminated(pod, corev1.PodSucceeded, 0, "Completed", ""))
	}
	for i := 0; i < n; i++ {
		waitReason(t, ns, fmt.Sprintf("req-%d", i), flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	}
	ended := counter.snapshot()
	reconciled = reconciles(t) - reconciled
	for i := 0; i < n; i++ {
		ta := get(t, ns, fmt.Sprintf("req-%d", i))
		if err := k8s.Delete(context.Background(), ta); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		key := client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("req-%d", i)}
		eventually(t, 20*time.Second, key.Name+" gone", func() bool {
			return apierrors.IsNotFound(k8s.Get(context.Background(), key, &flytev1.TaskAction{}))
		})
	}
	gone := counter.snapshot()
	return lifeCost{ns: ns, run: perTaskAction(before, ended, n), deletion: perTaskAction(ended, gone, n),
		reconciles: reconciled / float64(n)}
}

func perTaskAction(before, after map[string]int, n int) map[string]float64 {
	per := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 && !strings.Contains(k, "events") {
			per[k] = float64(d) / float64(n)
		}
	}
	return per
}

// tally sums requests per TaskAction into reads, writes and conflicts.
func tally(t testing.TB, what string, per map[string]float64) (reads, writes, conflicts float64) {
	var keys []string
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
		t.Logf("%s: %-40s %.2f per TaskAction", what, k, per[k])
	}
	return reads, writes, conflicts
}

// TestAPIRequestsPerTaskAction counts what one successful TaskAction costs the
// API server (Kubernetes Events excluded: a success emits none), from its
// creation to its end and for its deletion. Its pod starts within the Queued
// delay (a long one here, so that no machine is too slow for it), and its
// Executing is written at once (executingStatusDelay 0, so that a machine busy
// enough to look saturated does not hold it); the test waits for the RUNNING
// event before it lets the pod succeed: finalizer, pod, Executing, the end
// (three writes when the admission webhook adds the finalizer); the
// deletion's one request of the executor is the finalizer's release (the pod,
// finished, goes with its owner by Kubernetes' garbage collector).
func TestAPIRequestsPerTaskAction(t *testing.T) {
	const n = 20
	c := testConfig()
	c.QueuedStatusDelay = config.Duration{Duration: config.MaxQueuedStatusDelay}
	c.ExecutingStatusDelay = config.Duration{}
	stopManager()
	if err := startManager(c); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopManager()
		if err := startManager(testConfig()); err != nil {
			t.Fatal(err)
		}
	})
	cost := runToSuccess(t, n, false)
	reads, writes, conflicts := tally(t, "run", cost.run)
	t.Logf("per successful TaskAction: %.2f reads, %.2f writes, %.2f conflicts (n=%d)", reads, writes, conflicts, n)
	if writes > 4 {
		t.Errorf("%.2f writes per TaskAction, want at most 4", writes)
	}
	for i := 0; i < n; i++ {
		// Every state change still reported: QUEUED first.
		if p := phasesOf(eventsOf(cost.ns, fmt.Sprintf("req-%d", i))); !strings.HasPrefix(p, "1:QUEUED 1:RUNNING") || !strings.HasSuffix(p, "1:SUCCEEDED") {
			t.Errorf("req-%d: events %s", i, p)
		}
	}
	if conflicts > 0 {
		t.Errorf("%.2f conflicts per TaskAction, want none", conflicts)
	}
	if reads > 0.5 {
		t.Errorf("%.2f reads per TaskAction: reconciles should read from the cache", reads)
	}
	dreads, dwrites, dconflicts := tally(t, "deletion", cost.deletion)
	t.Logf("per deletion: %.2f reads, %.2f writes, %.2f conflicts", dreads, dwrites, dconflicts)
	if dwrites > 1 || dreads > 0 || dconflicts > 0 {
		t.Errorf("the deletion cost the executor %.2f writes, %.2f reads, %.2f conflicts per TaskAction, want one write (the finalizer's release)", dwrites, dreads, dconflicts)
	}

	// With the finalizer added at admission: one reconcile per watch event
	// that can change the outcome (the TaskAction's creation, its pod's
	// Running, Succeeded; fewer when events arrive together). The events of
	// the executor's own writes (the pod's create, the status) wake none.
	admitted := runToSuccess(t, n, true)
	_, writes, _ = tally(t, "admitted", admitted.run)
	t.Logf("with the finalizer from admission: %.2f writes, %.2f reconciles per TaskAction", writes, admitted.reconciles)
	if writes != 3 || admitted.reconciles > 3 {
		t.Errorf("with the finalizer from admission: %.2f writes (want 3: pod, Executing, the end), %.2f reconciles per TaskAction (want at most 3: the events of its own writes woke some)", writes, admitted.reconciles)
	}
}

// BenchmarkTaskActionLifecycle drives b.N TaskActions from creation to
// Succeeded against the real API server and reports the executor's API
// requests per TaskAction. Run: make bench-controller.
func BenchmarkTaskActionLifecycle(b *testing.B) {
	n := max(b.N, 10)
	b.ResetTimer()
	cost := runToSuccess(b, n, false)
	b.StopTimer()
	reads, writes, _ := tally(b, "run", cost.run)
	_, dwrites, _ := tally(b, "deletion", cost.deletion)
	b.ReportMetric(reads, "reads/taskaction")
	b.ReportMetric(writes, "writes/taskaction")
	b.ReportMetric(cost.run["PATCH taskactions/status 200"], "status-patches/taskaction")
	b.ReportMetric(dwrites, "deletion-writes/taskaction")
}
