package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// Deletion is what removing the TaskActions cost once all were terminal:
// the rest of their life after the hot path.
type Deletion struct {
	// By says who deleted them.
	By string `json:"by"`
	// Seconds from the start of the phase to the last TaskAction gone.
	Seconds float64 `json:"seconds"`
	Gone    int     `json:"gone"`
	Left    int     `json:"left"`
	// PodsLeft are the TaskActions' pods still there at the end: the rig has
	// no kube-controller-manager, whose garbage collector would delete the
	// pods of a deleted owner in a cluster.
	PodsLeft   int          `json:"podsLeft"`
	Controller RequestTable `json:"controllerRequests"`
	Harness    RequestTable `json:"harnessRequests"`
	APIServer  RequestTable `json:"apiServerRequests"`
	// RequestsPerTA is the deleter's requests per TaskAction: the
	// controller's own plus, for the floor, the harness's DELETEs.
	RequestsPerTA        float64  `json:"requestsPerTaskAction"`
	ControllerCPUSeconds float64  `json:"controllerCPUSeconds"`
	APIServerCPUSeconds  float64  `json:"apiServerCPUSeconds"`
	LogErrors            int      `json:"logErrors"`
	LogErrorSamples      []string `json:"logErrorSamples,omitempty"`
}

// deletionPhase removes every TaskAction and measures it. The executor's own
// garbage collector deletes them: a second executor process, started with a
// short gc.interval and gc.maxTTL once the first (gc off) has been measured
// and stopped, so that no deletion lands in the hot path's numbers; its
// requests are counted from its start (its cache sync included). The floor
// has no garbage collector: the harness deletes its TaskActions, one DELETE
// each, and those count as the floor's.
func (s *session) deletionPhase(ctx context.Context) (*Deletion, error) {
	o := s.o
	d := &Deletion{}
	before, err := s.snap(ctx, s.cp)
	if err != nil {
		return d, err
	}
	s.ob.armGone()
	start := time.Now()
	profiled := profileAPIServer(ctx, o, s.r.admin, s.mode+"-deletion", start)
	defer func() {
		if err := <-profiled; err != nil {
			logf("kube-apiserver CPU profile of the deletion: %v", err)
		}
	}()
	cp := s.cp
	switch s.mode {
	case "executor":
		d.By = fmt.Sprintf("the executor's garbage collector (gc.interval %s, gc.maxTTL %s), in a second executor process started after the hot path; its requests counted from its start", o.GCInterval, o.GCTTL)
		s.cp.p.Stop(30 * time.Second)
		cp, err = startExecutor(ctx, o, s.r, s.dir, s.exec, "executor-gc",
			[]string{"--executor.gc.interval=" + o.GCInterval.String(), "--executor.gc.maxTTL=" + o.GCTTL.String()})
		if cp != nil {
			p := cp.p
			s.stops = append(s.stops, func() { p.Stop(30 * time.Second) })
		}
		if err != nil {
			return d, err
		}
		before.ctrl, before.proc = nil, procStat{} // the whole life of the new process
	case "floor":
		d.By = "the harness (one DELETE per TaskAction, counted as the floor's)"
		if err := deleteAll(ctx, o, s.cl, s.ob); err != nil {
			return d, err
		}
	}
	end, timedOut, err := awaitDone(ctx, s.ob.allGone, o.GCTimeout, o.Settle, cp, func() {
		s.ob.mu.Lock()
		left := s.ob.goneLeft
		s.ob.mu.Unlock()
		logf("deletion: %d TaskActions left after %.0fs", left, time.Since(start).Seconds())
	})
	if err != nil {
		return d, err
	}
	after, err := s.snap(ctx, cp)
	if err != nil {
		return d, err
	}
	n := o.N
	s.ob.mu.Lock()
	d.Left = s.ob.goneLeft
	s.ob.mu.Unlock()
	d.Gone = n - d.Left
	d.Seconds = end.Sub(start).Seconds()
	d.Controller = requestTable(delta(counters(after.ctrl, "executor_api_requests_total", clientKey), counters(before.ctrl, "executor_api_requests_total", clientKey)), n)
	d.Harness = requestTable(delta(after.harness, before.harness), n)
	d.APIServer = requestTable(delta(counters(after.api, "apiserver_request_total", apiserverKey), counters(before.api, "apiserver_request_total", apiserverKey)), n)
	d.APIServerCPUSeconds = value(after.api, "process_cpu_seconds_total") - value(before.api, "process_cpu_seconds_total")
	d.RequestsPerTA = round3((d.Controller.Total + d.Harness.Total) / float64(n))
	d.ControllerCPUSeconds = after.proc.CPUSeconds - before.proc.CPUSeconds
	var pods corev1.PodList
	if err := s.hc.List(ctx, &pods, client.InNamespace(benchNamespace)); err == nil {
		d.PodsLeft = len(pods.Items)
	}
	if s.mode == "executor" {
		d.LogErrors, d.LogErrorSamples = logErrors(cp.p.LogPath())
	}
	if timedOut {
		return d, fmt.Errorf("timed out after %s: %d of %d TaskActions not deleted", o.GCTimeout, d.Left, n)
	}
	logf("deletion: %d TaskActions gone in %.1fs, %.2f requests/TaskAction (deleter), %d pods left", d.Gone, d.Seconds, d.RequestsPerTA, d.PodsLeft)
	return d, nil
}

// deleteAll deletes every TaskAction the harness created.
func deleteAll(ctx context.Context, o options, cl client.Client, ob *observer) error {
	ob.mu.Lock()
	var names []string
	for name, r := range ob.recs {
		if !r.created.IsZero() {
			names = append(names, name)
		}
	}
	ob.mu.Unlock()
	return inParallel(ctx, o.Creators, 0, len(names), 0, func(i int) error {
		ta := &flytev1.TaskAction{}
		ta.Name, ta.Namespace = names[i], benchNamespace
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := client.IgnoreNotFound(cl.Delete(cctx, ta)); err != nil {
			return fmt.Errorf("delete %s: %w", names[i], err)
		}
		return nil
	})
}
