package events

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/taskaction/executor/gen/flyteidl2/common"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/task"
	"github.com/taskaction/executor/gen/flyteidl2/workflow"
)

// Limits on identity fields: they are primary-key columns at the service.
const maxIdentityLen = 256

const phasePrefix = "ACTION_PHASE_"

// PhaseToProto is the proto phase of p; UNSPECIFIED for an unknown one.
func PhaseToProto(p Phase) common.ActionPhase {
	if p == "" {
		return common.ActionPhase_ACTION_PHASE_UNSPECIFIED
	}
	return common.ActionPhase(common.ActionPhase_value[phasePrefix+string(p)])
}

// PhaseFromProto names a proto phase; "" for UNSPECIFIED or an unknown one.
func PhaseFromProto(p common.ActionPhase) Phase {
	if !reportable(p) {
		return ""
	}
	return Phase(strings.TrimPrefix(p.String(), phasePrefix))
}

func reportable(p common.ActionPhase) bool {
	_, known := common.ActionPhase_name[int32(p)]
	return known && p != common.ActionPhase_ACTION_PHASE_UNSPECIFIED
}

// CacheStatusToProto parses a cache status name ("HIT" or "CACHE_HIT").
func CacheStatusToProto(s string) (core.CatalogCacheStatus, error) {
	if s == "" {
		return core.CatalogCacheStatus_CACHE_DISABLED, nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "CACHE_") {
		name = "CACHE_" + name
	}
	v, ok := core.CatalogCacheStatus_value[name]
	if !ok {
		return 0, fmt.Errorf("unknown cache status %q", s)
	}
	return core.CatalogCacheStatus(v), nil
}

// CacheStatusName is the executor's name of a cache status ("HIT").
func CacheStatusName(s core.CatalogCacheStatus) string {
	return strings.TrimPrefix(s.String(), "CACHE_")
}

func kindToProto(k string) (workflow.ErrorInfo_Kind, error) {
	switch strings.ToUpper(k) {
	case "":
		return workflow.ErrorInfo_KIND_UNSPECIFIED, nil
	case "USER":
		return workflow.ErrorInfo_KIND_USER, nil
	case "SYSTEM":
		return workflow.ErrorInfo_KIND_SYSTEM, nil
	}
	return 0, fmt.Errorf("error kind %q: want USER or SYSTEM", k)
}

func kindFromProto(k workflow.ErrorInfo_Kind) string {
	switch k {
	case workflow.ErrorInfo_KIND_USER:
		return "USER"
	case workflow.ErrorInfo_KIND_SYSTEM:
		return "SYSTEM"
	}
	return ""
}

// ErrorMessage is how an error travels in Flyte's ErrorInfo.message: the code
// in brackets, then the message. Flyte's UI shows it as it is.
func ErrorMessage(code, message string) string {
	switch {
	case code == "":
		return message
	case message == "":
		return "[" + code + "]"
	}
	return "[" + code + "] " + message
}

var codedMessage = regexp.MustCompile(`^\[([^\[\]\s]+)\](?: (.*))?$`)

// ParseErrorMessage splits what ErrorMessage joined; a message without a
// code in front comes back whole, with an empty code.
func ParseErrorMessage(s string) (code, message string) {
	m := codedMessage.FindStringSubmatch(s)
	if m == nil {
		return "", s
	}
	return m[1], m[2]
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

func actionID(org, project, domain, run, action string) *common.ActionIdentifier {
	return &common.ActionIdentifier{
		Run:  &common.RunIdentifier{Org: org, Project: project, Domain: domain, Name: run},
		Name: action,
	}
}

// ToProto converts ev to Flyte's ActionEvent and validates the result with
// ValidateProto, so that an event the service would refuse is refused before
// it can spoil a batch.
func ToProto(ev Event) (*workflow.ActionEvent, error) {
	if ev.Attempt < 0 || ev.Version < 0 {
		return nil, fmt.Errorf("%w %s: attempt %d and version %d must not be negative", ErrInvalidEvent, ev.key(), ev.Attempt, ev.Version)
	}
	p := &workflow.ActionEvent{
		Id:           actionID(ev.Org, ev.Project, ev.Domain, ev.Run, ev.Action),
		Attempt:      uint32(ev.Attempt),
		Phase:        PhaseToProto(ev.Phase),
		Version:      uint32(ev.Version),
		UpdatedTime:  ts(ev.UpdatedAt),
		ReportedTime: ts(ev.ReportedAt),
		Cluster:      ev.Cluster,
		LogInfo:      ev.LogLinks,
		LogContext:   ev.LogContext,
	}
	if ev.Phase != "" && p.Phase == common.ActionPhase_ACTION_PHASE_UNSPECIFIED {
		return nil, fmt.Errorf("%w %s: unknown phase %q", ErrInvalidEvent, ev.key(), ev.Phase)
	}
	cs, err := CacheStatusToProto(ev.CacheStatus)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalidEvent, ev.key(), err)
	}
	p.CacheStatus = cs
	if ev.Error != nil {
		kind, err := kindToProto(ev.Error.Kind)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrInvalidEvent, ev.key(), err)
		}
		p.ErrorInfo = &workflow.ErrorInfo{Message: ErrorMessage(ev.Error.Code, ev.Error.Message), Kind: kind}
	}
	if ev.OutputURI != "" || ev.ReportURI != "" {
		p.Outputs = &task.OutputReferences{OutputUri: ev.OutputURI, ReportUri: ev.ReportURI}
	}
	for _, ce := range ev.ClusterEvents {
		typ := workflow.ClusterEvent_TYPE_NORMAL
		if ce.Warning {
			typ = workflow.ClusterEvent_TYPE_WARNING
		}
		p.ClusterEvents = append(p.ClusterEvents, &workflow.ClusterEvent{
			OccurredAt: ts(ce.OccurredAt), Message: ce.Message, Reason: ce.Reason, Type: typ})
	}
	if p.LogContext == nil && ev.PodName != "" {
		p.LogContext = &core.LogContext{PrimaryPodName: ev.PodName, Pods: []*core.PodLogContext{{PodName: ev.PodName}}}
	}
	if s := ev.CacheSource; s != nil {
		p.CacheMetadata = &common.CacheMetadata{SourceActionAttempt: &common.ActionAttemptIdentifier{
			ActionId: actionID(s.Org, s.Project, s.Domain, s.Run, s.Action), Attempt: uint32(max(s.Attempt, 0))}}
	}
	if err := ValidateProto(p); err != nil {
		return nil, err
	}
	return p, nil
}

// FromProto converts an event read from the service.
func FromProto(p *workflow.ActionEvent) Event {
	run := p.GetId().GetRun()
	ev := Event{
		Org:         run.GetOrg(),
		Project:     run.GetProject(),
		Domain:      run.GetDomain(),
		Run:         run.GetName(),
		Action:      p.GetId().GetName(),
		Attempt:     int32(p.GetAttempt()),
		Phase:       PhaseFromProto(p.GetPhase()),
		Version:     int32(p.GetVersion()),
		UpdatedAt:   fromTS(p.GetUpdatedTime()),
		ReportedAt:  fromTS(p.GetReportedTime()),
		Cluster:     p.GetCluster(),
		OutputURI:   p.GetOutputs().GetOutputUri(),
		ReportURI:   p.GetOutputs().GetReportUri(),
		LogLinks:    p.GetLogInfo(),
		LogContext:  p.GetLogContext(),
		CacheStatus: CacheStatusName(p.GetCacheStatus()),
		PodName:     p.GetLogContext().GetPrimaryPodName(),
	}
	if e := p.GetErrorInfo(); e != nil {
		code, msg := ParseErrorMessage(e.GetMessage())
		ev.Error = &ErrorInfo{Code: code, Kind: kindFromProto(e.GetKind()), Message: msg}
	}
	for _, ce := range p.GetClusterEvents() {
		ev.ClusterEvents = append(ev.ClusterEvents, ClusterEvent{OccurredAt: fromTS(ce.GetOccurredAt()), Message: ce.GetMessage(),
			Reason: ce.GetReason(), Warning: ce.GetType() == workflow.ClusterEvent_TYPE_WARNING})
	}
	if src := p.GetCacheMetadata().GetSourceActionAttempt(); src != nil {
		r := src.GetActionId().GetRun()
		ev.CacheSource = &CacheSource{Org: r.GetOrg(), Project: r.GetProject(), Domain: r.GetDomain(), Run: r.GetName(),
			Action: src.GetActionId().GetName(), Attempt: int32(src.GetAttempt())}
	}
	return ev
}

// ErrInvalidEvent wraps every validation failure.
var ErrInvalidEvent = errors.New("invalid event")

// ValidateProto is the one definition of a valid event, applied by the
// Batcher before sending and by the service before storing. The org may be
// empty (Flyte's executor sends none); the rest of the identity may not.
func ValidateProto(p *workflow.ActionEvent) error {
	var problems []string
	run := p.GetId().GetRun()
	for _, f := range []struct {
		name, v  string
		required bool
	}{
		{"org", run.GetOrg(), false}, {"project", run.GetProject(), true}, {"domain", run.GetDomain(), true},
		{"run", run.GetName(), true}, {"action", p.GetId().GetName(), true},
	} {
		switch {
		case f.v == "" && f.required:
			problems = append(problems, "missing "+f.name)
		case len(f.v) > maxIdentityLen:
			problems = append(problems, fmt.Sprintf("%s longer than %d bytes", f.name, maxIdentityLen))
		}
	}
	if p.GetAttempt() == 0 {
		problems = append(problems, "attempt must be at least 1")
	}
	if !reportable(p.GetPhase()) {
		problems = append(problems, fmt.Sprintf("phase %v is not a reportable phase", p.GetPhase()))
	}
	if p.GetUpdatedTime() == nil {
		problems = append(problems, "missing updated time")
	}
	if e := p.GetErrorInfo(); e != nil {
		if _, ok := workflow.ErrorInfo_Kind_name[int32(e.GetKind())]; !ok {
			problems = append(problems, fmt.Sprintf("unknown error kind %d", e.GetKind()))
		}
	}
	if _, ok := core.CatalogCacheStatus_name[int32(p.GetCacheStatus())]; !ok {
		problems = append(problems, fmt.Sprintf("unknown cache status %d", p.GetCacheStatus()))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w %s: %s", ErrInvalidEvent, protoKey(p), strings.Join(problems, "; "))
}

func protoKey(p *workflow.ActionEvent) string {
	run := p.GetId().GetRun()
	return fmt.Sprintf("%s/%s/%s/%s attempt %d %s v%d", run.GetProject(), run.GetDomain(), run.GetName(), p.GetId().GetName(),
		p.GetAttempt(), strings.TrimPrefix(p.GetPhase().String(), phasePrefix), p.GetVersion())
}

func (ev Event) key() string {
	return fmt.Sprintf("%s/%s/%s/%s attempt %d %s v%d", ev.Project, ev.Domain, ev.Run, ev.Action, ev.Attempt, ev.Phase, ev.Version)
}
