package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/local"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/setup"
)

// record is what the harness saw of one TaskAction.
type record struct {
	created, podCreated, podTerminal, taTerminal, gone time.Time
	// running are the receipt times of each of its pods' first update in
	// phase Running, in order (kwok writes the phase and the containers'
	// running.startedAt in one update; startedAt itself has 1 s precision).
	running []time.Time
	// executing is when the harness first saw Progressing=True with reason
	// Executing (zero: never).
	executing time.Time
	// statusUpdates and metaUpdates count the TaskAction's updates seen on
	// the watch: status writes, and metadata writes (the finalizer's).
	statusUpdates, metaUpdates int
	failed                     bool
	want                       outcome
	pods                       int // distinct pods seen: attempts run
}

// podSeen is what the harness has seen of one pod.
type podSeen struct{ running, terminal bool }

type observer struct {
	mu      sync.Mutex
	recs    map[string]*record
	pods    map[string]podSeen
	done    []time.Time
	left    int
	allDone chan struct{}
	// goneLeft counts down the deletions once armed (armGone).
	goneLeft int
	allGone  chan struct{}
	// now is time.Now; tests set a clock of their own.
	now func() time.Time
}

func newObserver(n int) *observer {
	return &observer{recs: map[string]*record{}, pods: map[string]podSeen{}, left: n, allDone: make(chan struct{}), now: time.Now}
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
	now := ob.now()
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
	st, seen := ob.pods[p.Name]
	if !seen {
		r.pods++
	}
	if r.podCreated.IsZero() {
		r.podCreated = now
	}
	if p.Status.Phase == corev1.PodRunning && !st.running {
		st.running = true
		r.running = append(r.running, now)
	}
	// The last attempt's pod end is the one that ends the TaskAction.
	if (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && !st.terminal {
		st.terminal = true
		r.podTerminal = now
	}
	ob.pods[p.Name] = st
}

// onTA takes a TaskAction's add (old nil) or update: its first Executing,
// its end, and the write the update was.
func (ob *observer) onTA(old, obj any) {
	ta, ok := obj.(*flytev1.TaskAction)
	if !ok {
		return
	}
	prev, _ := old.(*flytev1.TaskAction)
	if prev != nil && prev.ResourceVersion == ta.ResourceVersion {
		return // an informer resync: no write
	}
	now := ob.now()
	ob.mu.Lock()
	defer ob.mu.Unlock()
	r := ob.get(ta.Name)
	if prev != nil {
		// The status subresource cannot change metadata, nor a metadata
		// patch the status: an update is one or the other.
		if metadataChanged(prev, ta) {
			r.metaUpdates++
		} else {
			r.statusUpdates++
		}
	}
	if r.executing.IsZero() && isExecuting(ta) {
		r.executing = now
	}
	if !r.taTerminal.IsZero() || !isTerminal(ta) {
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

// isExecuting: the status Flyte's UI shows as running.
func isExecuting(ta *flytev1.TaskAction) bool {
	c := meta.FindStatusCondition(ta.Status.Conditions, flytev1.ConditionProgressing)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == flytev1.ReasonExecuting
}

// metadataChanged: a write of the TaskAction's metadata (finalizers,
// labels, annotations, deletion) between two versions.
func metadataChanged(a, b *flytev1.TaskAction) bool {
	return !slices.Equal(a.Finalizers, b.Finalizers) || !maps.Equal(a.Labels, b.Labels) ||
		!maps.Equal(a.Annotations, b.Annotations) || !a.DeletionTimestamp.Equal(b.DeletionTimestamp)
}

// armGone starts counting the deletions of the n TaskActions created.
func (ob *observer) armGone() {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.allGone = make(chan struct{})
	for _, r := range ob.recs {
		if !r.created.IsZero() && r.gone.IsZero() {
			ob.goneLeft++
		}
	}
	if ob.goneLeft == 0 {
		close(ob.allGone)
	}
}

func (ob *observer) onTADelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	ta, ok := obj.(*flytev1.TaskAction)
	if !ok {
		return
	}
	now := ob.now()
	ob.mu.Lock()
	defer ob.mu.Unlock()
	r := ob.get(ta.Name)
	if !r.gone.IsZero() {
		return
	}
	r.gone = now
	if ob.allGone != nil && !r.created.IsZero() {
		ob.goneLeft--
		if ob.goneLeft == 0 {
			close(ob.allGone)
		}
	}
}

// controllerProc is the controller under test, running.
type controllerProc struct {
	p          *proc
	metricsURL string
}

// session is one controller on its fresh rig, with the harness's informers
// and client.
type session struct {
	o    options
	mode string
	dir  string
	r    *rig
	cp   *controllerProc
	exec *executorDeps // executor mode only
	// services are the processes that serve the controller under test: the
	// executor's events and cache services, or the webhook server of a
	// floor run with --floor-webhook. Their CPU is reported together.
	services []*proc
	ob       *observer
	cl       client.Client
	hc       cache.Cache
	stops    []func()
}

// executorDeps is what the executor talks to, kept for a second executor
// process (the deletion phase).
type executorDeps struct {
	// eventsAddr serves the events service's RPCs and its /metrics, which
	// count the Record calls and events (no proxy in their path).
	eventsAddr string
	cacheAddr  string
	config     string // --config file ("" for none)
	svcs       []*proc
	// webhooks are config/webhook's configurations installed pointing at
	// the executor's webhook server (nil: not installed).
	webhooks *envtest.WebhookInstallOptions
}

// args are the executor's flags for what it talks to.
func (d *executorDeps) args() []string {
	a := []string{"--executor.eventsServiceURL=http://" + d.eventsAddr, "--executor.cacheServiceURL=http://" + d.cacheAddr}
	if d.config != "" {
		a = append(a, "--config="+d.config)
	}
	if w := d.webhooks; w != nil {
		a = append(a, webhookArgs(w)...)
	}
	return a
}

// webhookArgs are the executor's flags to serve the webhooks w points the
// API server at.
func webhookArgs(w *envtest.WebhookInstallOptions) []string {
	return []string{"--executor.webhook.enabled=true", "--executor.webhook.host=" + w.LocalServingHost,
		"--executor.webhookPort=" + strconv.Itoa(w.LocalServingPort), "--executor.webhookCertPath=" + w.LocalServingCertDir}
}

// installWebhooks installs config/webhook's configurations as config/default
// deploys them, pointing the API server at a local port (by URL, with a
// generated certificate) for the executor to serve.
func installWebhooks(o options, r *rig) (*envtest.WebhookInstallOptions, error) {
	w := &envtest.WebhookInstallOptions{Paths: []string{filepath.Join(o.Root, "config", "webhook", "manifests.yaml")}, LocalServingHost: "127.0.0.1"}
	if err := w.Install(r.admin); err != nil {
		return nil, fmt.Errorf("install the webhook configurations: %w", err)
	}
	return w, nil
}

func (s *session) close() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
}

// bucket is the base URI of the TaskActions' inputs and outputs: a file://
// bucket the executor is configured to read (the Flyte form reads error.pb
// there when a pod ends), or a name nobody reads (the typed form).
func (s *session) bucket() string {
	if s.o.Workload == workloadFlyte {
		return local.BucketURI(s.dir)
	}
	return "s3://bench"
}

func startSession(ctx context.Context, o options, mode string, expect int) (s *session, err error) {
	s = &session{o: o, mode: mode}
	defer func() {
		if err != nil {
			s.close()
			s = nil
		}
	}()
	s.dir, err = os.MkdirTemp("", "bench-"+mode+"-")
	if err != nil {
		return s, err
	}
	if o.Keep {
		logf("work directory %s (kept)", s.dir)
	} else {
		dir := s.dir
		s.stops = append(s.stops, func() { _ = os.RemoveAll(dir) })
	}
	t0 := time.Now()
	s.r, err = startRig(ctx, o, s.dir)
	if err != nil {
		return s, err
	}
	s.stops = append(s.stops, s.r.stop)
	logf("control plane, kube-scheduler, kwok and %d nodes up in %s", o.Nodes, time.Since(t0).Round(time.Millisecond))

	// The harness's own informers and client (admin); their requests are
	// counted with the same instrumentation, so they can be told apart.
	hcfg := rest.CopyConfig(s.r.admin)
	hcfg.QPS, hcfg.Burst = 5000, 10000
	hcfg.UserAgent = "bench-harness"
	metrics.InstrumentRESTConfig(hcfg)
	scheme := setup.Scheme()
	s.cl, err = client.New(hcfg, client.Options{Scheme: scheme})
	if err != nil {
		return s, err
	}
	// Before the controller (and the executor's webhooks): its initial list
	// meets them, and none is admitted by the executor.
	if o.Unrelated > 0 {
		if err := createUnrelated(ctx, o, s.cl, s.bucket()); err != nil {
			return s, fmt.Errorf("unrelated objects: %w", err)
		}
	}

	switch mode {
	case "executor":
		s.exec, err = startExecutorDeps(ctx, o, s.r, s.dir)
		if s.exec != nil {
			deps := s.exec
			s.stops = append(s.stops, func() {
				if deps.webhooks != nil {
					_ = deps.webhooks.Cleanup()
				}
				for _, p := range deps.svcs {
					p.Stop(10 * time.Second)
				}
			})
		}
		if err != nil {
			return s, err
		}
		s.services = s.exec.svcs
		s.cp, err = startExecutor(ctx, o, s.r, s.dir, s.exec, "executor", []string{"--executor.gc.interval=0"})
	case "floor":
		if o.FloorWebhook {
			if err := s.startFloorWebhook(ctx); err != nil {
				return s, err
			}
		}
		s.cp, err = startFloor(ctx, o, s.r, s.dir)
	}
	if s.cp != nil {
		p := s.cp.p
		s.stops = append(s.stops, func() { p.Stop(30 * time.Second) })
	}
	if err != nil {
		return s, err
	}

	s.ob = newObserver(expect)
	s.hc, err = cache.New(hcfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{setup.ManagedLabel: "true"})},
	}})
	if err != nil {
		return s, err
	}
	cctx, ccancel := context.WithCancel(ctx)
	s.stops = append(s.stops, ccancel)
	for obj, h := range map[client.Object]toolscache.ResourceEventHandlerFuncs{
		&corev1.Pod{}:         {AddFunc: s.ob.onPod, UpdateFunc: func(_, n any) { s.ob.onPod(n) }},
		&flytev1.TaskAction{}: {AddFunc: func(n any) { s.ob.onTA(nil, n) }, UpdateFunc: s.ob.onTA, DeleteFunc: s.ob.onTADelete},
	} {
		inf, err := s.hc.GetInformer(cctx, obj)
		if err != nil {
			return s, err
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return s, err
		}
	}
	go func() { _ = s.hc.Start(cctx) }()
	if !s.hc.WaitForCacheSync(cctx) {
		return s, errors.New("harness caches did not sync")
	}
	return s, nil
}

// snapshot is the counters at one moment.
type snapshot struct {
	api, ctrl  []sample
	proc       procStat
	services   float64 // CPU seconds of the executor's events and cache services
	harnessCPU float64 // CPU seconds of this process (the harness)
	machine    machineCPU
	harness    map[string]float64
	events     eventCounts
}

func (s *session) snap(ctx context.Context, cp *controllerProc) (snapshot, error) {
	var sn snapshot
	var err error
	if sn.api, err = scrapeAPIServer(ctx, s.r.admin); err != nil {
		return sn, err
	}
	if cp != nil {
		if sn.ctrl, err = scrapeHTTP(ctx, cp.metricsURL); err != nil {
			return sn, fmt.Errorf("%s metrics: %w", s.mode, err)
		}
		if sn.proc, err = readProc(cp.p.Pid()); err != nil {
			return sn, err
		}
	}
	sn.harness = harnessCounts()
	if s.exec != nil {
		if sn.events, err = scrapeEvents(ctx, s.exec.eventsAddr); err != nil {
			return sn, err
		}
	}
	for _, p := range s.services {
		st, err := readProc(p.Pid())
		if err != nil {
			return sn, err
		}
		sn.services += st.CPUSeconds
	}
	self, err := readProc(os.Getpid())
	if err != nil {
		return sn, err
	}
	sn.harnessCPU = self.CPUSeconds
	sn.machine, err = readMachineCPU()
	return sn, err
}

func runMode(ctx context.Context, o options, mode string) (res *ModeResult, err error) {
	res = &ModeResult{Mode: mode, N: o.N, Workload: o.Workload}
	s, err := startSession(ctx, o, mode, o.N)
	if err != nil {
		return res, err
	}
	defer s.close()
	res.NodesUntaintedByHarness = s.r.nodeUntaintedByHarness
	cp, ob := s.cp, s.ob

	before, err := s.snap(ctx, cp)
	if err != nil {
		return res, err
	}

	// Create the TaskActions.
	start := time.Now()
	profiled := profileAPIServer(ctx, o, s.r.admin, mode, start)
	if err := createAll(ctx, o, s.cl, ob, 0, o.N, o.Rate, s.bucket()); err != nil {
		return res, err
	}
	res.CreateSeconds = time.Since(start).Seconds()
	logf("%d TaskActions created in %.1fs", o.N, res.CreateSeconds)

	// Wait for the end, with progress.
	end, timedOut, err := awaitDone(ctx, ob.allDone, o.Timeout, o.Settle, cp, func() {
		ob.mu.Lock()
		left := ob.left
		ob.mu.Unlock()
		st, _ := readProc(cp.p.Pid())
		logf("%d of %d terminal after %.0fs (%s RSS %d MiB, CPU %.1fs)", o.N-left, o.N, time.Since(start).Seconds(), mode, st.RSSKiB/1024, st.CPUSeconds)
	})
	if err != nil {
		return res, err
	}

	after, err := s.snap(ctx, cp)
	if err != nil {
		return res, err
	}

	// Numbers.
	ob.mu.Lock()
	res.fill(o, ob, start, end)
	ob.mu.Unlock()
	res.fillRequests(o, before, after)
	res.PeakRSSMiB = float64(after.proc.PeakRSSKiB) / 1024
	res.CPUSeconds = after.proc.CPUSeconds - before.proc.CPUSeconds
	res.CPUSecondsTotal = after.proc.CPUSeconds
	res.CPUSecondsPerTA = res.CPUSeconds / float64(o.N)
	res.ServicesCPUSeconds = after.services - before.services
	res.HarnessCPUSeconds = after.harnessCPU - before.harnessCPU
	res.MachineCPUSeconds, res.MachineBusy = after.machine.since(before.machine)
	res.APIServerCPUMsPerTA = 1000 * res.APIServerCPUSeconds / float64(o.N)
	res.RateLimiter = rateLimiterStats(before.ctrl, after.ctrl, res.Controller.Total)
	res.ExecutorMetrics = controllerMetrics(before.ctrl, after.ctrl)
	if s.exec != nil {
		ev := &EventStats{RecordCalls: after.events.calls - before.events.calls, Events: after.events.events - before.events.events,
			FailedCalls: after.events.failed - before.events.failed}
		if ev.Events > 0 {
			ev.RecordCallsPer1000Events = 1000 * float64(ev.RecordCalls) / float64(ev.Events)
		}
		ev.EventsPerTA = float64(ev.Events) / float64(o.N)
		res.Events = ev
	}
	res.LogErrors, res.LogErrorSamples = logErrors(cp.p.LogPath())
	if err := <-profiled; err != nil {
		logf("kube-apiserver CPU profile: %v", err)
	}
	if timedOut {
		return res, fmt.Errorf("timed out after %s: %d of %d TaskActions did not end", o.Timeout, ob.left, o.N)
	}
	if o.GC {
		d, err := s.deletionPhase(ctx)
		res.Deletion = d
		if err != nil {
			return res, fmt.Errorf("deletion phase: %w", err)
		}
	}
	return res, nil
}

// fillRequests puts the request tables of the hot path into res.
func (res *ModeResult) fillRequests(o options, before, after snapshot) {
	res.APIServer = requestTable(delta(counters(after.api, "apiserver_request_total", apiserverKey), counters(before.api, "apiserver_request_total", apiserverKey)), o.N)
	res.APIServerCPUSeconds = value(after.api, "process_cpu_seconds_total") - value(before.api, "process_cpu_seconds_total")
	res.Controller = requestTable(delta(counters(after.ctrl, "executor_api_requests_total", clientKey), counters(before.ctrl, "executor_api_requests_total", clientKey)), o.N)
	res.ControllerWrites = writeSplit(res.Controller, o.N)
	res.Harness = requestTable(delta(after.harness, before.harness), o.N)
	res.OtherRequestsPerTA = res.APIServer.TotalPerTA - res.Controller.TotalPerTA - res.Harness.TotalPerTA
	if res.Attempts > 0 {
		res.RequestsPerAttempt = round3(res.Controller.Total / float64(res.Attempts))
		res.APIServerRequestsPerAttempt = round3(res.APIServer.Total / float64(res.Attempts))
	}
}

// controllerMetrics are the controller's own counters of interest, as deltas.
func controllerMetrics(before, after []sample) map[string]float64 {
	out := map[string]float64{}
	transition := func(l map[string]string) string { return "transitions " + l["phase"] + " " + l["outcome"] }
	for k, v := range delta(counters(after, "executor_taskaction_transitions_total", transition), counters(before, "executor_taskaction_transitions_total", transition)) {
		out[k] = v
	}
	for _, name := range []string{"executor_taskaction_attempts_total", "executor_taskaction_retries_total", "executor_event_batch_events_count", "executor_event_batch_events_sum",
		"executor_event_batch_failures_total", "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
		"executor_event_batch_duration_seconds_sum", "executor_event_batch_duration_seconds_count",
		"executor_taskaction_terminal_latency_seconds_sum", "executor_taskaction_terminal_latency_seconds_count",
		"executor_taskaction_launch_latency_seconds_sum", "executor_taskaction_launch_latency_seconds_count",
		"controller_runtime_reconcile_time_seconds_sum", "controller_runtime_reconcile_time_seconds_count",
		"workqueue_queue_duration_seconds_sum", "workqueue_queue_duration_seconds_count", "workqueue_retries_total",
		"executor_api_request_duration_seconds_sum", "executor_api_request_duration_seconds_count",
		"executor_gc_deleted_total",
		"rest_client_rate_limiter_duration_seconds_sum", "rest_client_rate_limiter_duration_seconds_count"} {
		if d := value(after, name) - value(before, name); d != 0 {
			out[name] = d
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// rateLimiterStats is the time the controller's requests waited on
// client-go's client-side rate limiter (--qps/--burst), from
// rest_client_rate_limiter_duration_seconds, which controller-runtime serves
// only when the process enabled it; nil when the controller does not expose it.
func rateLimiterStats(before, after []sample, requests float64) *RateLimiterStats {
	const name = "rest_client_rate_limiter_duration_seconds"
	if !has(after, name+"_count") {
		return &RateLimiterStats{Exposed: false}
	}
	st := &RateLimiterStats{Exposed: true,
		WaitSeconds: round3(value(after, name+"_sum") - value(before, name+"_sum")),
		Waits:       value(after, name+"_count") - value(before, name+"_count")}
	if st.Waits > 0 {
		st.MeanWaitMS = round3(1000 * st.WaitSeconds / st.Waits)
	}
	// Requests that waited longer than 25 ms: above the histogram's second bucket.
	st.WaitsOver25ms = st.Waits - (bucket(after, name, "0.025") - bucket(before, name, "0.025"))
	if requests > 0 {
		st.WaitMSPerRequest = round3(1000 * st.WaitSeconds / requests)
	}
	return st
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
	args := []string{"floor", "--kubeconfig=" + r.ctrlKC,
		"--metrics-addr=" + addr, "--qps=" + strconv.FormatFloat(o.FloorQPS, 'f', -1, 64), "--burst=" + strconv.Itoa(o.FloorBurst),
		"--workers=" + strconv.Itoa(o.Workers), "--pod=" + o.FloorPod}
	if o.Unrelated > 0 {
		args = append(args, "--namespace="+benchNamespace)
	}
	p, err := startProc(ctx, "floor", filepath.Join(dir, "floor.log"), self, args...)
	if err != nil {
		return nil, err
	}
	cp := &controllerProc{p: p, metricsURL: "http://" + addr + "/metrics"}
	if err := waitLogLine(ctx, p, "floor: ready", 2*time.Minute); err != nil {
		return cp, err
	}
	return cp, waitHTTP(ctx, cp.metricsURL, 30*time.Second, p)
}

// startFloorWebhook installs the executor's webhooks and serves them with
// `executor webhook` (the webhook server alone): the floor's creates then pay
// the admission call the executor's do.
func (s *session) startFloorWebhook(ctx context.Context) error {
	w, err := installWebhooks(s.o, s.r)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() { _ = w.Cleanup() })
	args := append([]string{"webhook", "--kubeconfig=" + s.r.ctrlKC, "--executor.metricsBindAddress=0",
		"--executor.healthProbeBindAddress=0", "--executor.leaderElect=false"}, webhookArgs(w)...)
	p, err := startProc(ctx, "webhook", filepath.Join(s.dir, "webhook.log"), s.o.ExecutorBin, args...)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() { p.Stop(10 * time.Second) })
	s.services = append(s.services, p)
	return waitTCP(ctx, net.JoinHostPort(w.LocalServingHost, strconv.Itoa(w.LocalServingPort)), time.Minute, p)
}

// startExecutorDeps runs the events service and
// the cache service, each a subprocess, and writes the executor's config
// file when the workload needs one: the Flyte form's blob storage, a file://
// bucket in the work directory.
func startExecutorDeps(ctx context.Context, o options, r *rig, dir string) (*executorDeps, error) {
	d := &executorDeps{}
	if o.Webhook {
		w, err := installWebhooks(o, r)
		if err != nil {
			return d, err
		}
		d.webhooks = w
	}
	if o.Workload == workloadFlyte {
		b, err := json.Marshal(map[string]any{config.StorageSection: local.StorageConfig(dir)})
		if err != nil {
			return nil, err
		}
		d.config = filepath.Join(dir, "executor-config.yaml")
		if err := os.WriteFile(d.config, b, 0o644); err != nil {
			return nil, err
		}
	}
	evPort, err := freePort()
	if err != nil {
		return nil, err
	}
	evAddr := "127.0.0.1:" + strconv.Itoa(evPort)
	ev, err := startProc(ctx, "events-service", filepath.Join(dir, "events-service.log"), o.ExecutorBin,
		"events-service", "--listen="+evAddr, "--data-dir="+filepath.Join(dir, "events"))
	if err != nil {
		return nil, err
	}
	d.svcs = append(d.svcs, ev)
	cachePort, err := freePort()
	if err != nil {
		return d, err
	}
	d.cacheAddr = "127.0.0.1:" + strconv.Itoa(cachePort)
	cs, err := startProc(ctx, "cache-service", filepath.Join(dir, "cache-service.log"), o.ExecutorBin,
		"cache-service", "--listen="+d.cacheAddr, "--data-dir="+filepath.Join(dir, "cache"))
	if err != nil {
		return d, err
	}
	d.svcs = append(d.svcs, cs)
	for _, s := range []struct {
		p    *proc
		addr string
	}{{ev, evAddr}, {cs, d.cacheAddr}} {
		if err := waitTCP(ctx, s.addr, time.Minute, s.p); err != nil {
			return d, err
		}
	}
	d.eventsAddr = evAddr
	return d, nil
}

// startExecutor runs bin/executor (log <name>.log) against deps; gcArgs
// configure its garbage collector.
func startExecutor(ctx context.Context, o options, r *rig, dir string, deps *executorDeps, name string, gcArgs []string) (*controllerProc, error) {
	mport, err := freePort()
	if err != nil {
		return nil, err
	}
	maddr := "127.0.0.1:" + strconv.Itoa(mport)
	args := []string{"--kubeconfig=" + r.ctrlKC,
		"--executor.metricsBindAddress=" + maddr, "--executor.metricsSecure=false",
		"--executor.healthProbeBindAddress=0", "--executor.leaderElect=false",
		"--executor.kubeAPIQPS=" + strconv.FormatFloat(o.QPS, 'f', -1, 64), "--executor.kubeAPIBurst=" + strconv.Itoa(o.Burst)}
	args = append(args, deps.args()...)
	if o.Unrelated > 0 {
		args = append(args, "--executor.namespaces="+benchNamespace)
	}
	args = append(args, gcArgs...)
	args = append(args, strings.Fields(o.ExecutorArgs)...)
	p, err := startProc(ctx, name, filepath.Join(dir, name+".log"), o.ExecutorBin, args...)
	if err != nil {
		return nil, err
	}
	cp := &controllerProc{p: p, metricsURL: "http://" + maddr + "/metrics"}
	if err := waitHTTP(ctx, cp.metricsURL, 2*time.Minute, p); err != nil {
		return cp, err
	}
	// The metrics server starts before the caches sync: wait for the
	// reconciler's workers, which start once they have.
	if err := waitLogLine(ctx, p, `"msg":"Starting workers"`, 2*time.Minute); err != nil {
		return cp, err
	}
	time.Sleep(time.Second)
	return cp, nil
}

// wantFail spreads the failures evenly: TaskAction i fails when the running
// count of failures steps up at i.
func wantFail(i int, f float64) bool {
	return math.Floor(float64(i+1)*f) > math.Floor(float64(i)*f)
}

// createAll creates TaskActions first … first+n-1 of the workload, at rate
// per second (0: as fast as the creators go).
func createAll(ctx context.Context, o options, cl client.Client, ob *observer, first, n int, rate float64, bucket string) error {
	return inParallel(ctx, o.Creators, first, n, rate, func(i int) error {
		ta, want, err := workloadTaskAction(o, i, bucket)
		if err != nil {
			return err
		}
		if err := createRetrying(ctx, cl, ta); err != nil {
			return err
		}
		now := ob.now()
		ob.mu.Lock()
		rec := ob.get(ta.Name)
		rec.created, rec.want = now, want
		ob.mu.Unlock()
		return nil
	})
}

// inParallel calls do(i) for i in first … first+n-1 on workers goroutines, at
// most rate calls a second (0: no limit). It stops handing out work at the
// first error or when ctx ends, and returns that error once every call under
// way has returned.
func inParallel(ctx context.Context, workers, first, n int, rate float64, do func(i int) error) error {
	var limiter flowcontrol.RateLimiter
	if rate > 0 {
		limiter = flowcontrol.NewTokenBucketRateLimiter(float32(rate), 1)
	}
	idx := make(chan int)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := do(i); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := first; i < first+n; i++ {
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

// createRetrying creates obj, trying up to 5 times a second apart: a busy
// API server may time out or refuse a create now and then.
func createRetrying(ctx context.Context, cl client.Client, obj client.Object) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = cl.Create(cctx, obj)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", obj.GetName(), err)
	}
	return nil
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
	var toPod, podToTA, e2e, toExecuting []float64
	var ok, failed seenWriteSums
	executingFirst := 0
	first, last := start, start
	for _, r := range ob.recs {
		if r.created.IsZero() {
			continue
		}
		if d, early, seen := executingMS(r); seen {
			toExecuting = append(toExecuting, d)
			if early {
				executingFirst++
			}
		}
		if !r.taTerminal.IsZero() {
			if r.failed {
				failed.add(r)
			} else {
				ok.add(r)
			}
		}
		if !r.podCreated.IsZero() {
			toPod = append(toPod, ms(r.podCreated.Sub(r.created)))
		}
		res.Attempts += r.pods
		res.ExpectedAttempts += r.want.attempts()
		if !r.taTerminal.IsZero() {
			if r.failed {
				res.Failed++
			} else {
				res.Succeeded++
			}
			if r.failed != r.want.fail || r.pods != r.want.attempts() {
				res.UnexpectedOutcomes++
			}
			if r.want.retry {
				res.Retried++
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
	res.SeenWritesSucceeded, res.SeenWritesFailed = ok.perTaskAction(), failed.perTaskAction()
	// The floor writes no Executing by design: nothing to measure there.
	if res.Mode != "floor" {
		never := 0
		for _, r := range ob.recs {
			if !r.created.IsZero() && !r.taTerminal.IsZero() && r.executing.IsZero() {
				never++
			}
		}
		res.Executing = &ExecutingStats{PodRunningToExecutingMS: percentiles(toExecuting), EndedWithoutExecuting: never, SeenBeforePodRunning: executingFirst}
	}
	sort.Slice(ob.done, func(i, j int) bool { return ob.done[i].Before(ob.done[j]) })
	for _, t := range ob.done {
		res.Completions = append(res.Completions, math.Round(t.Sub(start).Seconds()*1000)/1000)
	}
	_ = end
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// executingMS is the time from the pod's running start to the TaskAction's
// first Executing, for the attempt running then: the last of its pods to
// have turned Running by that moment. early: the harness saw Executing
// before it saw any pod Running (its two watches are not ordered with each
// other), counted as 0. seen is false without Executing or a running pod.
func executingMS(r *record) (d float64, early, seen bool) {
	if r.executing.IsZero() || len(r.running) == 0 {
		return 0, false, false
	}
	from := r.running[0]
	for _, t := range r.running[1:] {
		if !t.After(r.executing) {
			from = t
		}
	}
	if r.executing.Before(from) {
		return 0, true, true
	}
	return ms(r.executing.Sub(from)), false, true
}

// seenWriteSums adds up the writes the harness's watches saw of TaskActions
// of one outcome: their pods (each a create) and their updates.
type seenWriteSums struct{ n, pods, status, meta int }

func (s *seenWriteSums) add(r *record) {
	s.n++
	s.pods += r.pods
	s.status += r.statusUpdates
	s.meta += r.metaUpdates
}

// perTaskAction is the sums per TaskAction; nil for none.
func (s seenWriteSums) perTaskAction() *SeenWrites {
	if s.n == 0 {
		return nil
	}
	per := func(v int) float64 { return round3(float64(v) / float64(s.n)) }
	return &SeenWrites{TaskActions: s.n, PodsCreated: per(s.pods), StatusUpdates: per(s.status), MetadataUpdates: per(s.meta),
		Writes: per(s.pods + s.status + s.meta)}
}

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

// awaitDone waits for done, bounded by bound, logging progress every 10 s and
// failing when the controller exits; once done it waits settle more, so that
// trailing writes are counted. end is when done came (or the bound passed).
func awaitDone(ctx context.Context, done <-chan struct{}, bound, settle time.Duration, cp *controllerProc, progress func()) (end time.Time, timedOut bool, err error) {
	timeout := time.NewTimer(bound)
	defer timeout.Stop()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-tick.C:
			progress()
			if cp.p.Exited() {
				return time.Time{}, false, cp.p.ExitError()
			}
		case <-timeout.C:
			timedOut = true
			break wait
		case <-ctx.Done():
			return time.Time{}, false, ctx.Err()
		}
	}
	end = time.Now()
	if !timedOut {
		select {
		case <-time.After(settle):
		case <-ctx.Done():
			return time.Time{}, false, ctx.Err()
		}
	}
	return end, timedOut, nil
}
