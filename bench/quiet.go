package main

import (
	"context"
	"runtime"
	"runtime/debug"
	"time"
)

// A mode starts on a quiet machine: what the last one left (a control plane
// being torn down, its processes' exit, the harness's own garbage) would
// otherwise slow whichever mode runs second in a round.
const (
	quietBusyShare = 0.25             // the machine's busy share of its CPUs counted as quiet
	quietSeconds   = 3                // consecutive quiet seconds
	quietMax       = 90 * time.Second // the wait's bound; the report says when it was reached
)

// Quiet is the wait before a mode started.
type Quiet struct {
	WaitSeconds float64 `json:"waitSeconds"`
	// BusyShare is the machine's busy share over the last second waited.
	BusyShare float64 `json:"busyShare"`
	// NotQuiet: the bound was reached and the mode started anyway.
	NotQuiet bool `json:"notQuiet,omitempty"`
}

// waitQuiet frees the harness's garbage, then waits until the machine's busy
// share stays below quietBusyShare for quietSeconds seconds in a row (at
// most quietMax).
func waitQuiet(ctx context.Context) Quiet {
	runtime.GC()
	debug.FreeOSMemory()
	start := time.Now()
	var q Quiet
	quiet := 0
	prev, err := readMachineCPU()
	if err != nil {
		return q
	}
	for quiet < quietSeconds {
		if time.Since(start) >= quietMax {
			q.NotQuiet = true
			break
		}
		select {
		case <-ctx.Done():
			return q
		case <-time.After(time.Second):
		}
		now, err := readMachineCPU()
		if err != nil {
			return q
		}
		_, q.BusyShare = now.since(prev)
		q.BusyShare = round3(q.BusyShare)
		prev = now
		if q.BusyShare < quietBusyShare {
			quiet++
		} else {
			quiet = 0
		}
	}
	q.WaitSeconds = round3(time.Since(start).Seconds())
	return q
}
