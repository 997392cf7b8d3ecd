package controller

import (
	"testing"

	"github.com/taskaction/executor/pkg/metrics"
)

// TestSaturated: TaskActions waiting in the queue make the executor
// saturated, and it stays so for pressureMemory after the queue empties; an
// idle one is not (unless the API server was pressed within pressureMemory,
// which no request of this test causes). A reconcile running is not
// saturation: one worker alone is not short of capacity.
func TestSaturated(t *testing.T) {
	r := &Reconciler{}
	q := &fakeQueue{}
	r.setQueue(q)
	if !metrics.APIPressureWithin(pressureMemory) && r.saturated() {
		t.Error("idle: saturated")
	}
	q.waiting = 3
	if !r.saturated() {
		t.Error("3 TaskActions in the queue: not saturated")
	}
	q.waiting = 0
	if !r.saturated() {
		t.Errorf("the queue emptied just now: not saturated (remembered for %v)", pressureMemory)
	}
}
