package controller

import (
	"testing"

	"github.com/taskaction/executor/pkg/metrics"
)

// TestSaturated: TaskActions waiting in the queue, or every worker busy,
// make the executor saturated; an idle one is not (unless the API server
// was pressed within pressureMemory, which no request of this test causes).
func TestSaturated(t *testing.T) {
	r := &Reconciler{workers: 2}
	waiting := 0
	n := func() int { return waiting }
	r.queued.Store(&n)
	if !metrics.APIPressureWithin(pressureMemory) && r.saturated() {
		t.Error("idle: saturated")
	}
	waiting = 3
	if !r.saturated() {
		t.Error("3 TaskActions in the queue: not saturated")
	}
	waiting = 0
	r.active.Store(2)
	if !r.saturated() {
		t.Error("every worker busy: not saturated")
	}
}
