// Package events reports TaskAction state changes to the events service:
// Flyte's flyteidl2.workflow.EventsProxyService, or the embedded one.
package events

import (
	"context"
	"sync"
	"time"

	"github.com/taskaction/executor/gen/flyteidl2/core"
)

// Phase is the phase an event reports: Flyte's ACTION_PHASE_* without the prefix.
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
	// PhasePaused is a condition waiting for its signal.
	PhasePaused Phase = "PAUSED"
	// PhaseRecovered is an action whose outputs came from an earlier run.
	PhaseRecovered Phase = "RECOVERED"
)

// Terminal says whether p ends the action: its event is a completion's, which
// a held batch does not keep waiting.
func (p Phase) Terminal() bool {
	switch p {
	case PhaseSucceeded, PhaseFailed, PhaseAborted, PhaseTimedOut, PhaseRecovered:
		return true
	}
	return false
}

// ErrorInfo is the error an event carries. Flyte's ErrorInfo has a message and
// a kind only; the code travels at the head of the message, as "[code] message".
type ErrorInfo struct {
	Code    string
	Kind    string // USER or SYSTEM
	Message string
}

// ClusterEvent is something the cluster said about the attempt (a Pod event, a reason).
type ClusterEvent struct {
	OccurredAt time.Time
	Message    string
	// Reason is a short machine-readable cause, e.g. a Kubernetes event reason.
	Reason string
	// Warning marks a Kubernetes Warning event (else Normal).
	Warning bool
}

// CacheSource is the attempt whose outputs a cache hit served.
type CacheSource struct {
	Org, Project, Domain, Run, Action string
	Attempt                           int32
}

// Event is one state change of one attempt of one action. (org, project,
// domain, run, action, attempt, phase, version) identifies it: the service
// stores it once.
type Event struct {
	// Org is optional: Flyte's own executor sends none.
	Org     string
	Project string
	Domain  string
	Run     string
	Action  string
	// ParentAction is not sent: Flyte's ActionEvent has no field for it (the
	// actions service knows every action's parent).
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
	// LogLinks are the attempt's log links (pkg/tasklog renders them).
	LogLinks []*core.TaskLog
	// LogContext names the attempt's pods and containers; when nil, PodName
	// (if set) becomes its primary pod.
	LogContext *core.LogContext
	// CacheStatus names a CatalogCacheStatus, with or without its CACHE_
	// prefix ("HIT", "CACHE_HIT"); empty is CACHE_DISABLED.
	CacheStatus string
	CacheSource *CacheSource
	PodName     string
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
