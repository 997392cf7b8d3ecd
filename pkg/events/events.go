// Package events reports TaskAction state changes to the events service.
package events

import (
	"context"
	"sync"
	"time"
)

// Phase is the phase an event reports.
type Phase string

const (
	PhaseQueued              Phase = "QUEUED"
	PhaseWaitingForResources Phase = "WAITING_FOR_RESOURCES"
	PhaseInitializing        Phase = "INITIALIZING"
	PhaseRunning             Phase = "RUNNING"
	PhaseSucceeded           Phase = "SUCCEEDED"
	PhaseFailed              Phase = "FAILED"
	PhaseAborted             Phase = "ABORTED"
	PhaseTimedOut            Phase = "TIMED_OUT"
)

// ErrorInfo is the error an event carries; the code is always sent.
type ErrorInfo struct {
	Code    string
	Kind    string // USER or SYSTEM
	Message string
}

// ClusterEvent is something the cluster said about the attempt (a Pod event, a reason).
type ClusterEvent struct {
	OccurredAt time.Time
	Message    string
}

// LogLink points at the attempt's logs.
type LogLink struct {
	Name string
	URI  string
}

// Event is one state change of one attempt of one action. (action, attempt,
// phase, version) identifies it: the service stores it once.
type Event struct {
	Project      string
	Domain       string
	Run          string
	Action       string
	ParentAction string
	Attempt      int32
	Phase        Phase
	Version      int32
	// UpdatedAt is the time of the transition.
	UpdatedAt time.Time
	// ReportedAt is when the event was sent; the Batcher sets it when zero.
	ReportedAt    time.Time
	Error         *ErrorInfo
	Cluster       string
	OutputURI     string
	ReportURI     string
	ClusterEvents []ClusterEvent
	LogLinks      []LogLink
	CacheStatus   string
	PodName       string
}

// Recorder delivers events. Record returns only once the event is durable at
// the events service (at-least-once), or with an error, in which case the
// caller must not treat the state change as reported.
type Recorder interface {
	Record(ctx context.Context, ev Event) error
}

// MemoryRecorder keeps events in memory. It stands in for the events service in
// tests of other packages; Fail makes Record return an error.
type MemoryRecorder struct {
	mu     sync.Mutex
	events []Event
	Fail   error
}

// Record stores ev, or returns Fail.
func (m *MemoryRecorder) Record(_ context.Context, ev Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Fail != nil {
		return m.Fail
	}
	m.events = append(m.events, ev)
	return nil
}

// Events returns a copy of what was recorded.
func (m *MemoryRecorder) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Event(nil), m.events...)
}

// SetFail sets the error Record returns (nil to succeed again).
func (m *MemoryRecorder) SetFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Fail = err
}
