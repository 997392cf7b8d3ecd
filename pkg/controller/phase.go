package controller

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// Labels and finalizer the executor owns on a TaskAction.
const (
	Finalizer                = "flyte.org/plugin-finalizer"
	TerminationStatusLabel   = "flyte.org/termination-status"
	TerminationStatusValue   = "terminated"
	CompletedTimeLabel       = "flyte.org/completed-time"
	CompletedTimeLabelFormat = "2006-01-02.15-04"
)

// Error codes the reconciler itself produces.
const (
	CodeInvalidSpec               = "InvalidSpec"
	CodePluginNotFound            = "PluginNotFound"
	CodeTimeout                   = "Timeout"
	CodeResourceDeletedExternally = "ResourceDeletedExternally"
	CodeMaxSystemFailuresExceeded = "MaxSystemFailuresExceeded"
	CodeSystemError               = "SystemError"
)

// IsTerminal says whether the TaskAction has reached its end.
func IsTerminal(ta *flytev1.TaskAction) bool {
	return meta.IsStatusConditionTrue(ta.Status.Conditions, flytev1.ConditionSucceeded) ||
		meta.IsStatusConditionTrue(ta.Status.Conditions, flytev1.ConditionFailed)
}

// transition is one reported change of an attempt.
type transition struct {
	phase   plugin.Phase
	message string
	err     *plugin.ExecError
	at      time.Time
	// final marks the TaskAction's last transition; reason is its condition reason.
	final  bool
	reason string
	// outputURI overrides where the event says the outputs are (a cache hit).
	outputURI string
}

// eventPhase maps a transition to the phase an event reports.
func eventPhase(t transition) events.Phase {
	switch t.phase {
	case plugin.PhaseQueued, plugin.PhaseNotStarted:
		return events.PhaseQueued
	case plugin.PhaseWaitingForResources:
		return events.PhaseWaitingForResources
	case plugin.PhaseInitializing:
		return events.PhaseInitializing
	case plugin.PhaseRunning:
		return events.PhaseRunning
	case plugin.PhaseSucceeded:
		return events.PhaseSucceeded
	}
	switch t.reason {
	case flytev1.ReasonTimedOut:
		return events.PhaseTimedOut
	case flytev1.ReasonAborted:
		return events.PhaseAborted
	}
	return events.PhaseFailed
}

// historyName is the phaseHistory entry of a transition.
func historyName(t transition) string {
	if t.final && t.reason != "" {
		return t.reason
	}
	switch t.phase {
	case plugin.PhaseQueued, plugin.PhaseWaitingForResources, plugin.PhaseNotStarted:
		return flytev1.ReasonQueued
	case plugin.PhaseInitializing:
		return flytev1.ReasonInitializing
	case plugin.PhaseRunning:
		return flytev1.ReasonExecuting
	case plugin.PhaseSucceeded:
		return flytev1.ReasonCompleted
	}
	return flytev1.ReasonRetryableFailure
}

// applyTransition writes t into st: conditions, phase history, plugin phase and
// error state. It is pure; the caller decides whether anything changed.
func applyTransition(st *flytev1.TaskActionStatus, t transition, generation int64) {
	at := metav1.NewTime(t.at.UTC().Truncate(time.Second))
	name := historyName(t)
	if n := len(st.PhaseHistory); n == 0 || st.PhaseHistory[n-1].Phase != name {
		st.PhaseHistory = append(st.PhaseHistory, flytev1.PhaseTransition{Phase: name, OccurredAt: at, Message: truncate(t.message, 1024)})
	}
	st.PluginPhase = string(t.phase)
	st.ObservedGeneration = generation
	if t.err != nil {
		st.ErrorState = &flytev1.ErrorState{Code: t.err.Code, Kind: t.err.Kind, Message: truncate(t.err.Message, 4096)}
	}

	msg := t.message
	if t.err != nil && msg == "" {
		msg = t.err.Message
	}
	switch {
	case t.final && t.phase == plugin.PhaseSucceeded:
		setCondition(st, flytev1.ConditionProgressing, metav1.ConditionFalse, flytev1.ReasonCompleted, "TaskAction has completed", at, generation)
		setCondition(st, flytev1.ConditionSucceeded, metav1.ConditionTrue, flytev1.ReasonCompleted, "TaskAction completed successfully", at, generation)
	case t.final:
		setCondition(st, flytev1.ConditionProgressing, metav1.ConditionFalse, t.reason, msg, at, generation)
		setCondition(st, flytev1.ConditionFailed, metav1.ConditionTrue, t.reason, msg, at, generation)
	case t.phase == plugin.PhaseRetryableFailure:
		setCondition(st, flytev1.ConditionProgressing, metav1.ConditionTrue, flytev1.ReasonRetryableFailure, msg, at, generation)
	default:
		setCondition(st, flytev1.ConditionProgressing, metav1.ConditionTrue, name, msg, at, generation)
	}
	if t.final {
		st.CompletedAt = &at
		st.SystemRetryAt = nil
	}
}

// setCondition sets a condition whose lastTransitionTime is the time of the
// transition itself (not of the reconcile that noticed it).
func setCondition(st *flytev1.TaskActionStatus, typ string, status metav1.ConditionStatus, reason, msg string, at metav1.Time, gen int64) {
	if reason == "" {
		reason = flytev1.ReasonQueued
	}
	c := metav1.Condition{Type: typ, Status: status, Reason: reason, Message: truncate(msg, 4096), ObservedGeneration: gen, LastTransitionTime: at}
	if old := meta.FindStatusCondition(st.Conditions, typ); old != nil && old.Status == status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// validateSpec lists the fields a task action needs and does not have.
func validateSpec(ta *flytev1.TaskAction) []string {
	s := ta.Spec
	var missing []string
	for _, f := range []struct {
		name  string
		empty bool
	}{
		{"runName", s.RunName == ""},
		{"project", s.Project == ""},
		{"domain", s.Domain == ""},
		{"actionName", s.ActionName == ""},
		{"taskType", s.TaskType == ""},
		{"taskTemplate", len(s.TaskTemplate) == 0 && s.Template == nil},
		{"template.container", s.Template != nil && s.Template.Container == nil},
		{"template.container.image", s.Template != nil && s.Template.Container != nil && s.Template.Container.Image == ""},
		{"inputUri", s.InputURI == ""},
		{"runOutputBase", s.RunOutputBase == ""},
	} {
		if f.empty {
			missing = append(missing, f.name)
		}
	}
	return missing
}

func missingFieldsMessage(missing []string) string {
	return fmt.Sprintf("required spec fields are missing: %s", strings.Join(missing, ", "))
}

// systemBackoff is the wait before relaunching after the n-th consecutive system failure.
func systemBackoff(base time.Duration, n int32) time.Duration {
	d := base
	for i := int32(1); i < n && d < 5*time.Minute; i++ {
		d *= 2
	}
	if d > 5*time.Minute {
		d = 5 * time.Minute
	}
	return d
}

// maxAttempts is retries+1.
func maxAttempts(ta *flytev1.TaskAction) int32 {
	t, err := task.FromTaskAction(ta)
	if err != nil {
		return 1
	}
	return t.MaxAttempts()
}
