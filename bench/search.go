package main

import (
	"context"
	"fmt"
	"math"
	"time"
)

// SearchParams are the steady-rate search's settings.
type SearchParams struct {
	StartRate float64 `json:"startRatePerSecond"`
	Factor    float64 `json:"stepFactor"`
	Step      string  `json:"stepDuration"`
	P99Bound  string  `json:"p99BoundCreateToTerminal"`
	MaxSteps  int     `json:"maxSteps"`
}

// SearchStep is one rate held for one step's duration.
type SearchStep struct {
	Rate       float64 `json:"targetRatePerSecond"`
	Created    int     `json:"created"`
	CreateRate float64 `json:"achievedCreateRatePerSecond"`
	Ended      int     `json:"ended"`
	// CreateToTerminalMS counts a TaskAction unfinished at the step's end at
	// the time it had waited then (a lower bound, above the p99 bound).
	CreateToTerminalMS Percentiles `json:"createToTerminalMs"`
	CPUSeconds         float64     `json:"controllerCPUSeconds"`
	// MachineBusy is the whole machine's busy share of its CPUs during the
	// step (1: CPU-bound).
	MachineBusy float64 `json:"machineBusyFraction"`
	Pass        bool    `json:"pass"`
	Why         string  `json:"why,omitempty"`
}

// SearchResult is one controller's steady-rate search.
type SearchResult struct {
	Mode  string        `json:"mode"`
	Error string        `json:"error,omitempty"`
	Steps []*SearchStep `json:"steps"`
	// SustainedRate is the highest rate whose step passed; 0: none did.
	SustainedRate float64 `json:"sustainedRatePerSecond"`
	// HarnessBound: the search stopped because the harness could not create
	// at the next rate, not because the controller failed it.
	HarnessBound bool    `json:"harnessBound,omitempty"`
	PeakRSSMiB   float64 `json:"peakRSSMiB"`
}

// runSearch holds the controller, on one fresh control plane, at rising
// creation rates, each for o.SearchStep: the start rate, then × the factor,
// until a step's p99 create → terminal exceeds the bound (or the harness
// cannot create at the rate, or the steps run out). A step passes when the
// harness created at ≥ 90% of the rate and the p99 of its TaskActions'
// create → terminal is within the bound; its stragglers have until the last
// create + the bound to end, and count above the bound if they do not.
// TaskActions of earlier steps stay (ended) in the API server and the caches.
func runSearch(ctx context.Context, o options, mode string) (*SearchResult, error) {
	res := &SearchResult{Mode: mode}
	s, err := startSession(ctx, o, mode, math.MaxInt32)
	if err != nil {
		return res, err
	}
	defer s.close()
	next := 0
	rate := o.SearchStart
	for range o.SearchMaxSteps {
		n := max(1, int(math.Round(rate*o.SearchStep.Seconds())))
		first := next
		next += n
		st := &SearchStep{Rate: round3(rate), Created: n}
		res.Steps = append(res.Steps, st)
		before, _ := readProc(s.cp.p.Pid())
		machineBefore, _ := readMachineCPU()
		logf("search %s: %.1f TaskActions/s for %s (%d)", mode, rate, o.SearchStep, n)
		t0 := time.Now()
		if err := createAll(ctx, o, s.cl, s.ob, first, n, rate, s.bucket()); err != nil {
			return res, err
		}
		lastCreate := time.Now()
		st.CreateRate = round3(float64(n) / lastCreate.Sub(t0).Seconds())
		deadline := lastCreate.Add(o.SearchP99 + time.Second)
		for {
			ended := s.stepEnded(first, n)
			if ended == n || time.Now().After(deadline) {
				break
			}
			if s.cp.p.Exited() {
				return res, s.cp.p.ExitError()
			}
			select {
			case <-time.After(500 * time.Millisecond):
			case <-ctx.Done():
				return res, ctx.Err()
			}
		}
		now := time.Now()
		var e2e []float64
		s.ob.mu.Lock()
		for i := first; i < first+n; i++ {
			r := s.ob.recs[taskActionName(o, i)]
			switch {
			case r == nil || r.created.IsZero():
			case r.taTerminal.IsZero():
				e2e = append(e2e, ms(now.Sub(r.created)))
			default:
				st.Ended++
				e2e = append(e2e, ms(r.taTerminal.Sub(r.created)))
			}
		}
		s.ob.mu.Unlock()
		st.CreateToTerminalMS = percentiles(e2e)
		after, _ := readProc(s.cp.p.Pid())
		st.CPUSeconds = round3(after.CPUSeconds - before.CPUSeconds)
		if machineAfter, err := readMachineCPU(); err == nil {
			_, share := machineAfter.since(machineBefore)
			st.MachineBusy = round3(share)
		}
		res.PeakRSSMiB = float64(after.PeakRSSKiB) / 1024
		bound := float64(o.SearchP99.Milliseconds())
		switch {
		case st.CreateRate < 0.9*rate:
			st.Why = fmt.Sprintf("the harness created at %.1f/s only", st.CreateRate)
			res.HarnessBound = true
		case st.CreateToTerminalMS.P99 > bound:
			st.Why = fmt.Sprintf("p99 create → terminal %.0f ms > %.0f ms (%d of %d ended)", st.CreateToTerminalMS.P99, bound, st.Ended, n)
		default:
			st.Pass = true
			res.SustainedRate = st.Rate
		}
		logf("search %s: %.1f/s: created at %.1f/s, %d of %d ended, p50/p99 %.0f/%.0f ms, CPU %.1fs, machine busy %.2f: %s",
			mode, rate, st.CreateRate, st.Ended, n, st.CreateToTerminalMS.P50, st.CreateToTerminalMS.P99, st.CPUSeconds, st.MachineBusy, passText(st))
		if !st.Pass {
			break
		}
		rate *= o.SearchFactor
	}
	return res, nil
}

func (s *session) stepEnded(first, n int) int {
	s.ob.mu.Lock()
	defer s.ob.mu.Unlock()
	ended := 0
	for i := first; i < first+n; i++ {
		if r := s.ob.recs[taskActionName(s.o, i)]; r != nil && !r.taTerminal.IsZero() {
			ended++
		}
	}
	return ended
}

func passText(st *SearchStep) string {
	if st.Pass {
		return "pass"
	}
	return "FAIL: " + st.Why
}
