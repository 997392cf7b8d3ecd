package events

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/taskaction/executor/gen/executor/events/v1"
)

// Limits on identity fields: they are primary-key columns at the service.
const maxIdentityLen = 256

var phaseToProto = map[Phase]eventsv1.Phase{
	PhaseQueued:              eventsv1.Phase_PHASE_QUEUED,
	PhaseWaitingForResources: eventsv1.Phase_PHASE_WAITING_FOR_RESOURCES,
	PhaseInitializing:        eventsv1.Phase_PHASE_INITIALIZING,
	PhaseRunning:             eventsv1.Phase_PHASE_RUNNING,
	PhaseSucceeded:           eventsv1.Phase_PHASE_SUCCEEDED,
	PhaseFailed:              eventsv1.Phase_PHASE_FAILED,
	PhaseAborted:             eventsv1.Phase_PHASE_ABORTED,
	PhaseTimedOut:            eventsv1.Phase_PHASE_TIMED_OUT,
}

var phaseFromProto = func() map[eventsv1.Phase]Phase {
	m := make(map[eventsv1.Phase]Phase, len(phaseToProto))
	for k, v := range phaseToProto {
		m[v] = k
	}
	return m
}()

// PhaseFromProto names a proto phase; "" for an unknown one.
func PhaseFromProto(p eventsv1.Phase) Phase { return phaseFromProto[p] }

// PhaseToProto is the proto phase of p; PHASE_UNSPECIFIED for an unknown one.
func PhaseToProto(p Phase) eventsv1.Phase { return phaseToProto[p] }

func kindToProto(k string) (eventsv1.ErrorKind, error) {
	switch strings.ToUpper(k) {
	case "":
		return eventsv1.ErrorKind_ERROR_KIND_UNSPECIFIED, nil
	case "USER":
		return eventsv1.ErrorKind_ERROR_KIND_USER, nil
	case "SYSTEM":
		return eventsv1.ErrorKind_ERROR_KIND_SYSTEM, nil
	}
	return 0, fmt.Errorf("error kind %q: want USER or SYSTEM", k)
}

func kindFromProto(k eventsv1.ErrorKind) string {
	switch k {
	case eventsv1.ErrorKind_ERROR_KIND_USER:
		return "USER"
	case eventsv1.ErrorKind_ERROR_KIND_SYSTEM:
		return "SYSTEM"
	}
	return ""
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func fromTS(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

// ToProto converts ev and validates the result with ValidateProto, so that an
// event the service would refuse is refused before it can spoil a batch.
func ToProto(ev Event) (*eventsv1.ActionEvent, error) {
	if ev.Attempt < 0 || ev.Version < 0 {
		return nil, fmt.Errorf("%w %s: attempt %d and version %d must not be negative", ErrInvalidEvent, ev.key(), ev.Attempt, ev.Version)
	}
	p := &eventsv1.ActionEvent{
		Id: &eventsv1.ActionIdentifier{
			Project: ev.Project, Domain: ev.Domain, Run: ev.Run, Action: ev.Action,
		},
		ParentAction: ev.ParentAction,
		Attempt:      uint32(ev.Attempt),
		Phase:        PhaseToProto(ev.Phase),
		Version:      uint32(ev.Version),
		UpdatedTime:  ts(ev.UpdatedAt),
		ReportedTime: ts(ev.ReportedAt),
		Cluster:      ev.Cluster,
		CacheStatus:  ev.CacheStatus,
		PodName:      ev.PodName,
	}
	if ev.Phase != "" && p.Phase == eventsv1.Phase_PHASE_UNSPECIFIED {
		return nil, fmt.Errorf("%w %s: unknown phase %q", ErrInvalidEvent, ev.key(), ev.Phase)
	}
	if ev.Error != nil {
		kind, err := kindToProto(ev.Error.Kind)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrInvalidEvent, ev.key(), err)
		}
		p.Error = &eventsv1.ErrorInfo{Code: ev.Error.Code, Kind: kind, Message: ev.Error.Message}
	}
	if ev.OutputURI != "" || ev.ReportURI != "" {
		p.Outputs = &eventsv1.OutputReferences{OutputUri: ev.OutputURI, ReportUri: ev.ReportURI}
	}
	for _, ce := range ev.ClusterEvents {
		p.ClusterEvents = append(p.ClusterEvents, &eventsv1.ClusterEvent{OccurredAt: ts(ce.OccurredAt), Message: ce.Message})
	}
	for _, l := range ev.LogLinks {
		p.LogLinks = append(p.LogLinks, &eventsv1.LogLink{Name: l.Name, Uri: l.URI})
	}
	if err := ValidateProto(p); err != nil {
		return nil, err
	}
	return p, nil
}

// FromProto converts an event read from the service.
func FromProto(p *eventsv1.ActionEvent) Event {
	ev := Event{
		Project:      p.GetId().GetProject(),
		Domain:       p.GetId().GetDomain(),
		Run:          p.GetId().GetRun(),
		Action:       p.GetId().GetAction(),
		ParentAction: p.GetParentAction(),
		Attempt:      int32(p.GetAttempt()),
		Phase:        PhaseFromProto(p.GetPhase()),
		Version:      int32(p.GetVersion()),
		UpdatedAt:    fromTS(p.GetUpdatedTime()),
		ReportedAt:   fromTS(p.GetReportedTime()),
		Cluster:      p.GetCluster(),
		OutputURI:    p.GetOutputs().GetOutputUri(),
		ReportURI:    p.GetOutputs().GetReportUri(),
		CacheStatus:  p.GetCacheStatus(),
		PodName:      p.GetPodName(),
	}
	if e := p.GetError(); e != nil {
		ev.Error = &ErrorInfo{Code: e.GetCode(), Kind: kindFromProto(e.GetKind()), Message: e.GetMessage()}
	}
	for _, ce := range p.GetClusterEvents() {
		ev.ClusterEvents = append(ev.ClusterEvents, ClusterEvent{OccurredAt: fromTS(ce.GetOccurredAt()), Message: ce.GetMessage()})
	}
	for _, l := range p.GetLogLinks() {
		ev.LogLinks = append(ev.LogLinks, LogLink{Name: l.GetName(), URI: l.GetUri()})
	}
	return ev
}

// ErrInvalidEvent wraps every validation failure.
var ErrInvalidEvent = errors.New("invalid event")

// ValidateProto is the one definition of a valid event, applied by the
// Batcher before sending and by the service before storing.
func ValidateProto(p *eventsv1.ActionEvent) error {
	var problems []string
	id := p.GetId()
	for _, f := range []struct{ name, v string }{
		{"project", id.GetProject()}, {"domain", id.GetDomain()},
		{"run", id.GetRun()}, {"action", id.GetAction()},
	} {
		switch {
		case f.v == "":
			problems = append(problems, "missing "+f.name)
		case len(f.v) > maxIdentityLen:
			problems = append(problems, fmt.Sprintf("%s longer than %d bytes", f.name, maxIdentityLen))
		}
	}
	if p.GetAttempt() == 0 {
		problems = append(problems, "attempt must be at least 1")
	}
	if _, ok := phaseFromProto[p.GetPhase()]; !ok {
		problems = append(problems, fmt.Sprintf("phase %v is not a reportable phase", p.GetPhase()))
	}
	if p.GetUpdatedTime() == nil {
		problems = append(problems, "missing updated time")
	}
	if e := p.GetError(); e != nil {
		if e.GetCode() == "" {
			problems = append(problems, "error without a code")
		}
		if _, ok := eventsv1.ErrorKind_name[int32(e.GetKind())]; !ok {
			problems = append(problems, fmt.Sprintf("unknown error kind %d", e.GetKind()))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w %s: %s", ErrInvalidEvent, protoKey(p), strings.Join(problems, "; "))
}

func protoKey(p *eventsv1.ActionEvent) string {
	id := p.GetId()
	return fmt.Sprintf("%s/%s/%s/%s attempt %d %s v%d", id.GetProject(), id.GetDomain(), id.GetRun(), id.GetAction(),
		p.GetAttempt(), strings.TrimPrefix(p.GetPhase().String(), "PHASE_"), p.GetVersion())
}

func (ev Event) key() string {
	return fmt.Sprintf("%s/%s/%s/%s attempt %d %s v%d", ev.Project, ev.Domain, ev.Run, ev.Action, ev.Attempt, ev.Phase, ev.Version)
}
