package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// runMode runs one mode (the executor or the floor) on a session of its own:
// it creates the workload's TaskActions, waits for their end and measures
// what it took, then runs the deletion phase when asked to.
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
