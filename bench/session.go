package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/local"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/setup"
)

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
