package events_test

import (
	"testing"

	"github.com/taskaction/executor/pkg/events"
)

func TestPhaseTerminal(t *testing.T) {
	for p, want := range map[events.Phase]bool{
		events.PhaseQueued: false, events.PhaseWaitingForResources: false, events.PhaseInitializing: false,
		events.PhaseRunning: false, events.PhasePaused: false,
		events.PhaseSucceeded: true, events.PhaseFailed: true, events.PhaseAborted: true,
		events.PhaseTimedOut: true, events.PhaseRecovered: true,
	} {
		if got := p.Terminal(); got != want {
			t.Errorf("%s.Terminal() = %v, want %v", p, got, want)
		}
	}
}
