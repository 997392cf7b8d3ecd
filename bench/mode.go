package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/kwokrig"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/setup"
)

// FailAnnotation on a pod (through the TaskAction's podTemplate) makes the
// bench-pod-failed stage fail it.
const FailAnnotation = kwokrig.FailAnnotation

// record is what the harness saw of one TaskAction.
type record struct {
	created, podCreated, podTerminal, taTerminal time.Time
	failed, wantFail                             bool
}

type observer struct {
	mu      sync.Mutex
	recs    map[string]*record
	done    []time.Time
	left    int
	allDone chan struct{}
}

func (ob *observer) get(name string) *record {
	r, ok := ob.recs[name]
	if !ok {
		r = &record{}
		ob.recs[name] = r
	}
	return r
}

func (ob *observer) onPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	owner := ""
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "TaskAction" {
			owner = ref.Name
		}
	}
	if owner == "" {
		return
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	r := ob.get(owner)
	if r.podCreated.IsZero() {
		r.podCreated = now
	}
	if (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && r.podTerminal.IsZero() {
		r.podTerminal = now
	}
}

func (ob *observer) onTA(obj any) {
	ta, ok := obj.(*flytev1.TaskAction)
	if !ok || !isTerminal(ta) {
		return
	}
	now := time.Now()
	ob.mu.Lock()
	defer ob.mu.Unlock()
	r := ob.get(ta.Name)
	if !r.taTerminal.IsZero() {
		return
	}
	r.taTerminal = now
	for _, c := range ta.Status.Conditions {
		if c.Type == flytev1.ConditionFailed && c.Status == metav1.ConditionTrue {
			r.failed = true
		}
	}
	ob.done = append(ob.done, now)
	ob.left--
	if ob.left == 0 {
		close(ob.allDone)
	}
}

// controllerProc is the controller under test, running.
type controllerProc struct {
	p          *proc
	metricsURL string
}

func runMode(ctx context.Context, o options, mode string) (res *ModeResult, err error) {
	dir, err := os.MkdirTemp("", "bench-"+mode+"-")
	if err != nil {
		return nil, err
	}
	if o.Keep {
		logf("work directory %s (kept)", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	res = &ModeResult{Mode: mode, N: o.N}
	t0 := time.Now()
	r, err := startRig(ctx, o, dir)
	if err != nil {
		return res, err
	}
	defer r.stop()
	logf("control plane, kube-scheduler, kwok and %d nodes up in %s", o.Nodes, time.Since(t0).Round(time.Millisecond))
	res.NodesUntaintedByHarness = r.nodeUntaintedByHarness

	var proxy *eventsProxy
	var cp *controllerProc
	switch mode {
	case "executor":
		var svcs []*proc
		cp, proxy, svcs, err = startExecutor(ctx, o, r, dir)
		defer func() {
			for _, s := range svcs {
				s.Stop(10 * time.Second)
			}
		}()
		if proxy != nil {
			defer proxy.close()
		}
	case "floor":
		cp, err = startFloor(ctx, o, r, dir)
	}
	if cp != nil {
		defer cp.p.Stop(30 * time.Second)
	}
	if err != nil {
		return res, err
	}

	// The harness's own informers and client (admin); their requests are
	// counted with the same instrumentation, so they can be told apart.
	hcfg := rest.CopyConfig(r.admin)
	hcfg.QPS, hcfg.Burst = 5000, 10000
	hcfg.UserAgent = "bench-harness"
	metrics.InstrumentRESTConfig(hcfg)
	harnessBefore := harnessCounts()

	ob := &observer{recs: map[string]*record{}, left: o.N, allDone: make(chan struct{})}
	scheme := setup.Scheme()
	hc, err := cache.New(hcfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{setup.ManagedLabel: "true"})},
	}})
	if err != nil {
		return res, err
	}
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	for obj, h := range map[client.Object]func(any){&corev1.Pod{}: ob.onPod, &flytev1.TaskAction{}: ob.onTA} {
		inf, err := hc.GetInformer(cctx, obj)
		if err != nil {
			return res, err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: h, UpdateFunc: func(_, n any) { h(n) },
		}); err != nil {
			return res, err
		}
	}
	go func() { _ = hc.Start(cctx) }()
	if !hc.WaitForCacheSync(cctx) {
		return res, errors.New("harness caches did not sync")
	}
	cl, err := client.New(hcfg, client.Options{Scheme: scheme})
	if err != nil {
		return res, err
	}

	apiBefore, err := scrapeAPIServer(ctx, r.admin)
	if err != nil {
		return res, err
	}
	ctrlBefore, err := scrapeHTTP(ctx, cp.metricsURL)
	if err != nil {
		return res, fmt.Errorf("%s metrics: %w", mode, err)
	}
	procBefore, err := readProc(cp.p.Pid())
	if err != nil {
		return res, err
	}
	var evBefore, evCallsBefore int64
	if proxy != nil {
		evBefore, evCallsBefore = proxy.events.Load(), proxy.records.Load()
	}

	// Create the TaskActions.
	start := time.Now()
	if err := createAll(ctx, o, cl, ob); err != nil {
		return res, err
	}
	res.CreateSeconds = time.Since(start).Seconds()
	logf("%d TaskActions created in %.1fs", o.N, res.CreateSeconds)

	// Wait for the end, with progress.
	timeout := time.NewTimer(o.Timeout)
	defer timeout.Stop()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	timedOut := false
wait:
	for {
		select {
		case <-ob.allDone:
			break wait
		case <-tick.C:
			ob.mu.Lock()
			left := ob.left
			ob.mu.Unlock()
			st, _ := readProc(cp.p.Pid())
			logf("%d of %d terminal after %.0fs (%s RSS %d MiB, CPU %.1fs)", o.N-left, o.N, time.Since(start).Seconds(), mode, st.RSSKiB/1024, st.CPUSeconds)
			if cp.p.Exited() {
				return res, cp.p.ExitError()
			}
		case <-timeout.C:
			timedOut = true
			break wait
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	end := time.Now()
	if !timedOut {
		select {
		case <-time.After(o.Settle):
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}

	apiAfter, err := scrapeAPIServer(ctx, r.admin)
	if err != nil {
		return res, err
	}
	ctrlAfter, err := scrapeHTTP(ctx, cp.metricsURL)
	if err != nil {
		return res, fmt.Errorf("%s metrics: %w", mode, err)
	}
	procAfter, err := readProc(cp.p.Pid())
	if err != nil {
		return res, err
	}
	harnessAfter := harnessCounts()
	ccancel()

	// Numbers.
	ob.mu.Lock()
	defer ob.mu.Unlock()
	res.fill(o, ob, start, end)
	res.APIServer = requestTable(delta(counters(apiAfter, "apiserver_request_total", apiserverKey), counters(apiBefore, "apiserver_request_total", apiserverKey)), o.N)
	res.APIServerCPUSeconds = value(apiAfter, "process_cpu_seconds_total") - value(apiBefore, "process_cpu_seconds_total")
	res.Controller = requestTable(delta(counters(ctrlAfter, "executor_api_requests_total", clientKey), counters(ctrlBefore, "executor_api_requests_total", clientKey)), o.N)
	res.Harness = requestTable(delta(harnessAfter, harnessBefore), o.N)
	res.OtherRequestsPerTA = res.APIServer.TotalPerTA - res.Controller.TotalPerTA - res.Harness.TotalPerTA
	res.PeakRSSMiB = float64(procAfter.PeakRSSKiB) / 1024
	res.CPUSeconds = procAfter.CPUSeconds - procBefore.CPUSeconds
	res.CPUSecondsTotal = procAfter.CPUSeconds
	res.ExecutorMetrics = map[string]float64{}
	for k, v := range delta(counters(ctrlAfter, "executor_taskaction_transitions_total", func(l map[string]string) string {
		return "transitions " + l["phase"] + " " + l["outcome"]
	}), counters(ctrlBefore, "executor_taskaction_transitions_total", func(l map[string]string) string {
		return "transitions " + l["phase"] + " " + l["outcome"]
	})) {
		res.ExecutorMetrics[k] = v
	}
	for _, name := range []string{"executor_taskaction_attempts_total", "executor_event_batch_events_count", "executor_event_batch_events_sum",
		"executor_event_batch_failures_total", "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
		"executor_event_batch_duration_seconds_sum", "executor_event_batch_duration_seconds_count",
		"executor_taskaction_terminal_latency_seconds_sum", "executor_taskaction_terminal_latency_seconds_count",
		"executor_taskaction_launch_latency_seconds_sum", "executor_taskaction_launch_latency_seconds_count",
		"controller_runtime_reconcile_time_seconds_sum", "controller_runtime_reconcile_time_seconds_count",
		"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count", "workqueue_retries_total",
		"executor_api_request_duration_seconds_sum", "executor_api_request_duration_seconds_count",
		"rest_client_rate_limiter_duration_seconds_sum", "rest_client_rate_limiter_duration_seconds_count"} {
		if d := value(ctrlAfter, name) - value(ctrlBefore, name); d != 0 {
			res.ExecutorMetrics[name] = d
		}
	}
	if len(res.ExecutorMetrics) == 0 {
		res.ExecutorMetrics = nil
	}
	if proxy != nil {
		ev := &EventStats{RecordCalls: proxy.records.Load() - evCallsBefore, Events: proxy.events.Load() - evBefore,
			Undecoded: proxy.undecoded.Load(), FailedCalls: proxy.recordFailed.Load()}
		if ev.Events > 0 {
			ev.RecordCallsPer1000Events = 1000 * float64(ev.RecordCalls) / float64(ev.Events)
		}
		ev.EventsPerTA = float64(ev.Events) / float64(o.N)
		res.Events = ev
	}
	res.LogErrors, res.LogErrorSamples = logErrors(cp.p.LogPath())
	if timedOut {
		return res, fmt.Errorf("timed out after %s: %d of %d TaskActions did not end", o.Timeout, ob.left, o.N)
	}
	return res, nil
}

func harnessCounts() map[string]float64 {
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "executor_api_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out[clientKey(l)] += m.GetCounter().GetValue()
		}
	}
	return out
}

func startFloor(ctx context.Context, o options, r *rig, dir string) (*controllerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := startProc(ctx, "floor", filepath.Join(dir, "floor.log"), self, "floor", "--kubeconfig="+r.ctrlKC,
		"--metrics-addr="+addr, "--qps="+strconv.FormatFloat(o.QPS, 'f', -1, 64), "--burst="+strconv.Itoa(o.Burst),
		"--workers="+strconv.Itoa(o.Workers))
	if err != nil {
		return nil, err
	}
	cp := &controllerProc{p: p, metricsURL: "http://" + addr + "/metrics"}
	if err := waitLogLine(ctx, p, "floor: ready", 2*time.Minute); err != nil {
		return cp, err
	}
	return cp, waitHTTP(ctx, cp.metricsURL, 30*time.Second, p)
}

// startExecutor runs the events service (behind the counting proxy), the
// cache service and bin/executor, each a subprocess.
func startExecutor(ctx context.Context, o options, r *rig, dir string) (*controllerProc, *eventsProxy, []*proc, error) {
	var svcs []*proc
	evPort, err := freePort()
	if err != nil {
		return nil, nil, nil, err
	}
	evAddr := "127.0.0.1:" + strconv.Itoa(evPort)
	ev, err := startProc(ctx, "events-service", filepath.Join(dir, "events-service.log"), o.ExecutorBin,
		"events-service", "--listen="+evAddr, "--data-dir="+filepath.Join(dir, "events"))
	if err != nil {
		return nil, nil, svcs, err
	}
	svcs = append(svcs, ev)
	cachePort, err := freePort()
	if err != nil {
		return nil, nil, svcs, err
	}
	cacheAddr := "127.0.0.1:" + strconv.Itoa(cachePort)
	cs, err := startProc(ctx, "cache-service", filepath.Join(dir, "cache-service.log"), o.ExecutorBin,
		"cache-service", "--listen="+cacheAddr, "--data-dir="+filepath.Join(dir, "cache"))
	if err != nil {
		return nil, nil, svcs, err
	}
	svcs = append(svcs, cs)
	for _, s := range []struct {
		p    *proc
		addr string
	}{{ev, evAddr}, {cs, cacheAddr}} {
		if err := waitTCP(ctx, s.addr, time.Minute, s.p); err != nil {
			return nil, nil, svcs, err
		}
	}
	proxy, err := startEventsProxy("http://" + evAddr)
	if err != nil {
		return nil, nil, svcs, err
	}
	mport, err := freePort()
	if err != nil {
		return nil, proxy, svcs, err
	}
	maddr := "127.0.0.1:" + strconv.Itoa(mport)
	args := []string{"--kubeconfig=" + r.ctrlKC,
		"--executor.metricsBindAddress=" + maddr, "--executor.metricsSecure=false",
		"--executor.healthProbeBindAddress=0", "--executor.gc.interval=0", "--executor.leaderElect=false",
		"--executor.eventsServiceURL=http://" + proxy.addr, "--executor.cacheServiceURL=http://" + cacheAddr,
		"--executor.kubeAPIQPS=" + strconv.FormatFloat(o.QPS, 'f', -1, 64), "--executor.kubeAPIBurst=" + strconv.Itoa(o.Burst)}
	args = append(args, strings.Fields(o.ExecutorArgs)...)
	p, err := startProc(ctx, "executor", filepath.Join(dir, "executor.log"), o.ExecutorBin, args...)
	if err != nil {
		return nil, proxy, svcs, err
	}
	cp := &controllerProc{p: p, metricsURL: "http://" + maddr + "/metrics"}
	if err := waitHTTP(ctx, cp.metricsURL, 2*time.Minute, p); err != nil {
		return cp, proxy, svcs, err
	}
	// The metrics server starts before the caches sync: wait for the
	// reconciler's workers, which start once they have.
	if err := waitLogLine(ctx, p, `"msg":"Starting workers"`, 2*time.Minute); err != nil {
		return cp, proxy, svcs, err
	}
	time.Sleep(time.Second)
	return cp, proxy, svcs, nil
}

// wantFail spreads the failures evenly: TaskAction i fails when the running
// count of failures steps up at i.
func wantFail(i int, f float64) bool {
	return math.Floor(float64(i+1)*f) > math.Floor(float64(i)*f)
}

func benchTaskAction(i int, fail bool) *flytev1.TaskAction {
	name := fmt.Sprintf("bench-%05d", i)
	tt := &flytev1.TypedTaskTemplate{
		ID:        flytev1.TaskID{Name: "bench", Version: "v1"},
		Container: &flytev1.Container{Image: "busybox:1.36", Command: []string{"true"}},
	}
	if fail {
		tt.PodTemplate = &flytev1.PodTemplate{Annotations: map[string]string{FailAnnotation: "true"}}
	}
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNamespace},
		Spec: flytev1.TaskActionSpec{RunName: "bench", Project: "bench", Domain: "development",
			ActionName: name, TaskType: "container", Template: tt,
			InputURI: "s3://bench/inputs/" + name + "/inputs.pb", RunOutputBase: "s3://bench/outputs/bench"},
	}
}

func createAll(ctx context.Context, o options, cl client.Client, ob *observer) error {
	var limiter flowcontrol.RateLimiter
	if o.Rate > 0 {
		limiter = flowcontrol.NewTokenBucketRateLimiter(float32(o.Rate), 1)
	}
	idx := make(chan int)
	errc := make(chan error, o.Creators)
	var wg sync.WaitGroup
	for range o.Creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				fail := wantFail(i, o.FailFraction)
				ta := benchTaskAction(i, fail)
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					err = cl.Create(cctx, ta)
					cancel()
					if err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(time.Second)
				}
				if err != nil {
					errc <- fmt.Errorf("create %s: %w", ta.Name, err)
					return
				}
				now := time.Now()
				ob.mu.Lock()
				rec := ob.get(ta.Name)
				rec.created, rec.wantFail = now, fail
				ob.mu.Unlock()
			}
		}()
	}
	var err error
feed:
	for i := range o.N {
		if limiter != nil {
			if err = limiter.Wait(ctx); err != nil {
				break
			}
		}
		select {
		case idx <- i:
		case err = <-errc:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(idx)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errc:
		default:
		}
	}
	return err
}

// logErrors counts error lines in a controller's log and keeps a few distinct ones.
func logErrors(path string) (int, []string) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil
	}
	defer f.Close()
	n := 0
	seen := map[string]bool{}
	var samples []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"level":"error"`) && !strings.Contains(line, "\tERROR\t") && !strings.HasPrefix(line, "floor: ") {
			continue
		}
		if strings.HasPrefix(line, "floor: ready") {
			continue
		}
		n++
		key := line
		if i := strings.Index(line, `"msg":`); i >= 0 {
			key = line[i:min(len(line), i+160)]
		}
		if !seen[key] && len(samples) < 8 {
			seen[key] = true
			samples = append(samples, line[:min(len(line), 600)])
		}
	}
	return n, samples
}

// fill computes the latencies and the throughput from the observations.
func (res *ModeResult) fill(o options, ob *observer, start, end time.Time) {
	var toPod, podToTA, e2e []float64
	first, last := start, start
	for _, r := range ob.recs {
		if r.created.IsZero() {
			continue
		}
		if !r.podCreated.IsZero() {
			toPod = append(toPod, ms(r.podCreated.Sub(r.created)))
		}
		if !r.taTerminal.IsZero() {
			if r.failed {
				res.Failed++
			} else {
				res.Succeeded++
			}
			if r.failed != r.wantFail {
				res.UnexpectedOutcomes++
			}
			e2e = append(e2e, ms(r.taTerminal.Sub(r.created)))
			if !r.podTerminal.IsZero() {
				podToTA = append(podToTA, ms(r.taTerminal.Sub(r.podTerminal)))
			}
			if r.taTerminal.After(last) {
				last = r.taTerminal
			}
		}
	}
	_ = first
	res.Unfinished = o.N - res.Succeeded - res.Failed
	res.WallSeconds = last.Sub(start).Seconds()
	if res.WallSeconds > 0 {
		res.TaskActionsPerSecond = float64(res.Succeeded+res.Failed) / res.WallSeconds
	}
	res.CreateToPodMS = percentiles(toPod)
	res.PodTerminalToTerminalMS = percentiles(podToTA)
	res.CreateToTerminalMS = percentiles(e2e)
	sort.Slice(ob.done, func(i, j int) bool { return ob.done[i].Before(ob.done[j]) })
	for _, t := range ob.done {
		res.Completions = append(res.Completions, math.Round(t.Sub(start).Seconds()*1000)/1000)
	}
	_ = end
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	sort.Float64s(v)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(v)))) - 1
		return math.Round(v[max(0, min(i, len(v)-1))])
	}
	return Percentiles{Count: len(v), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: math.Round(v[len(v)-1])}
}
