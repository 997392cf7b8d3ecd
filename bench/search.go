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
	// Refine is how many steps follow the first failing one, each between
	// the highest passing and the lowest failing rate.
	Refine int `json:"refineSteps,omitempty"`
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
	// Refine: a step of the finer search between a passing and a failing rate.
	Refine bool `json:"refine,omitempty"`
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
	HarnessBound bool `json:"harnessBound,omitempty"`
	// Quiet is the wait for a quiet machine before the search started.
	Quiet      *Quiet  `json:"quietBefore,omitempty"`
	PeakRSSMiB float64 `json:"peakRSSMiB"`
}

// runSearch holds the controller, on one fresh control plane, at rising
// creation rates, each for o.SearchStep: the start rate, then × the factor,
// until a step's p99 create → terminal exceeds the bound (or the harness
// cannot create at the rate, or the steps run out). A step passes when the
// harness created at ≥ 90% of the rate and the p99 of its TaskActions'
// create → terminal is within the bound; its stragglers have until the last
// create + the bound to end, and count above the bound if they do not.
// Then, with o.SearchRefine, that many steps narrow the edge: each at the
// geometric mean of the highest passing and the lowest failing rate, once
// every TaskAction created so far has ended (a backlog left by the failing
// step would fail the next one for it). TaskActions of earlier steps stay
// (ended) in the API server and the caches.
func runSearch(ctx context.Context, o options, mode string) (*SearchResult, error) {
	res := &SearchResult{Mode: mode}
	s, err := startSession(ctx, o, mode, math.MaxInt32)
	if err != nil {
		return res, err
	}
	defer s.close()
	next := 0
	step := func(rate float64, refine bool) (*SearchStep, error) {
		n := max(1, int(math.Round(rate*o.SearchStep.Seconds())))
		first := next
		next += n
		st := &SearchStep{Rate: round3(rate), Created: n, Refine: refine}
		res.Steps = append(res.Steps, st)
		return st, s.holdRate(ctx, st, first, res)
	}
	pass, fail := 0.0, 0.0 // the highest passing rate, the lowest failing one
	rate := o.SearchStart
	for range o.SearchMaxSteps {
		st, err := step(rate, false)
		if err != nil {
			return res, err
		}
		if !st.Pass {
			fail = rate
			break
		}
		pass = rate
		rate *= o.SearchFactor
	}
	for range o.SearchRefine {
		if pass == 0 || fail == 0 || res.HarnessBound {
			break
		}
		if !s.drained(ctx, next, 2*o.SearchP99) {
			logf("search %s: the earlier steps' TaskActions did not all end within %s; no finer step", mode, 2*o.SearchP99)
			break
		}
		rate := refineRate(pass, fail)
		if rate <= pass || rate >= fail {
			break // the edge is as narrow as one decimal
		}
		st, err := step(rate, true)
		if err != nil {
			return res, err
		}
		if st.Pass {
			pass = rate
		} else {
			fail = rate
		}
	}
	return res, nil
}

// refineRate is the next rate of the finer search between a passing and a
// failing rate: their geometric mean (the coarse steps are a geometric
// series), to one decimal.
func refineRate(pass, fail float64) float64 {
	return math.Round(math.Sqrt(pass*fail)*10) / 10
}

// holdRate creates the step's TaskActions at its rate, waits for them (until
// the last create + the bound) and judges the step.
func (s *session) holdRate(ctx context.Context, st *SearchStep, first int, res *SearchResult) error {
	o, mode, rate, n := s.o, res.Mode, st.Rate, st.Created
	before, _ := readProc(s.cp.p.Pid())
	machineBefore, _ := readMachineCPU()
	logf("search %s: %.1f TaskActions/s for %s (%d)", mode, rate, o.SearchStep, n)
	t0 := time.Now()
	if err := createAll(ctx, o, s.cl, s.ob, first, n, rate, s.bucket()); err != nil {
		return err
	}
	lastCreate := time.Now()
	st.CreateRate = round3(float64(n) / lastCreate.Sub(t0).Seconds())
	if err := s.waitEnded(ctx, first, n, lastCreate.Add(o.SearchP99+time.Second)); err != nil {
		return err
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
		res.SustainedRate = max(res.SustainedRate, st.Rate)
	}
	logf("search %s: %.1f/s: created at %.1f/s, %d of %d ended, p50/p99 %.0f/%.0f ms, CPU %.1fs, machine busy %.2f: %s",
		mode, rate, st.CreateRate, st.Ended, n, st.CreateToTerminalMS.P50, st.CreateToTerminalMS.P99, st.CPUSeconds, st.MachineBusy, passText(st))
	return nil
}

// waitEnded waits until the n TaskActions from first have ended or the
// deadline passed.
func (s *session) waitEnded(ctx context.Context, first, n int, deadline time.Time) error {
	for s.stepEnded(first, n) < n && time.Now().Before(deadline) {
		if s.cp.p.Exited() {
			return s.cp.p.ExitError()
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// drained says whether all n TaskActions created so far have ended, waiting
// up to wait for them.
func (s *session) drained(ctx context.Context, n int, wait time.Duration) bool {
	return s.waitEnded(ctx, 0, n, time.Now().Add(wait)) == nil && s.stepEnded(0, n) == n
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
