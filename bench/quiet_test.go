package main

import (
	"context"
	"strings"
	"testing"
)

// The report says how long each run waited for a quiet machine, and when a
// run started without one.
func TestQuietText(t *testing.T) {
	if got := quietText([]*ModeResult{{Mode: "floor"}}); got != "" {
		t.Errorf("no waits recorded, yet %q", got)
	}
	got := quietText([]*ModeResult{{Mode: "floor", Quiet: &Quiet{WaitSeconds: 3}}, {Mode: "executor", Quiet: &Quiet{WaitSeconds: 90, NotQuiet: true}}})
	for _, want := range []string{"3, 90 s, in run order", "1 run(s) started after the 1m30s bound"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}

// A round compares the executor's CPU per TaskAction with the floor's, the
// controller's own and kube-apiserver's.
func TestRoundCPURatios(t *testing.T) {
	fl := &ModeResult{Mode: "floor", Round: 1, N: 10, TaskActionsPerSecond: 50, CPUSecondsPerTA: 0.002, APIServerCPUMsPerTA: 20}
	ex := &ModeResult{Mode: "executor", Round: 1, N: 10, TaskActionsPerSecond: 40, CPUSecondsPerTA: 0.003, APIServerCPUMsPerTA: 22}
	rs := roundResults([]*ModeResult{fl, ex})
	if len(rs) != 1 || rs[0].ControllerCPURatio != 1.5 || rs[0].APIServerCPURatio != 1.1 || rs[0].Ratio != 0.8 {
		t.Errorf("rounds %+v", rs)
	}
}

// waitQuiet returns at once when its context is done.
func TestWaitQuietStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if q := waitQuiet(ctx); q.NotQuiet {
		t.Errorf("cancelled wait reported %+v", q)
	}
}
