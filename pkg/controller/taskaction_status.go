package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/plugin"
)

// Error codes the reconciler itself produces.
const (
	CodeInvalidSpec               = "InvalidSpec"
	CodePluginNotFound            = "PluginNotFound"
	CodeTimeout                   = "Timeout"
	CodeResourceDeletedExternally = plugin.CodeResourceDeletedExternally
	CodeMaxSystemFailuresExceeded = "MaxSystemFailuresExceeded"
	CodeSystemError               = "SystemError"
	CodeForeignResource           = "ResourceNameTaken"
	CodeLaunchRefused             = "LaunchRefused"
	CodeDuplicateAction           = "DuplicateAction"
	// CodeStorageError: blob storage could not be read (inputs, error.pb).
	CodeStorageError = "StorageError"
)

// Limits that keep the status small (etcd's object limit, and every watcher
// of the object pays for its size).
const (
	maxHistory          = 16
	maxHistoryMessage   = 256
	maxConditionMessage = 1024
	maxErrorMessage     = 4096
)

// transition is one reported change of an attempt.
type transition struct {
	attempt uint32
	phase   plugin.Phase
	message string
	err     *plugin.ExecError
	// at is when it happened (a pod's finish time); the conditions carry when it was recorded.
	at time.Time
	// final marks the TaskAction's last transition; reason is its condition reason.
	final  bool
	reason string
	// outputURI overrides where the event says the outputs are (a cache hit).
	outputURI string
	// cacheSource is the attempt whose outputs a cache hit served.
	cacheSource *cache.Source
	// paused: a condition action waiting for its signal.
	paused bool
	// podCreated: the Queued of a new pod, reported the same whenever it is
	// computed (podCreated), so without the pod's log context, which changes
	// as it starts; the later events carry it.
	podCreated bool
}

// historyName is the phaseHistory entry (and condition reason) of a transition.
func historyName(t transition) string {
	if t.final && t.reason != "" {
		return t.reason
	}
	if t.paused {
		return flytev1.ReasonPaused
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

// record writes transition t into st as of now (the time it is recorded):
// phase history, conditions, plugin phase and version, error state. version
// is the version of the event that reports t.
func record(st *flytev1.TaskActionStatus, t transition, version uint32, now time.Time) {
	name := historyName(t)
	at := metav1.NewTime(t.at.UTC().Truncate(time.Second))
	recorded := metav1.NewTime(now.UTC().Truncate(time.Second))
	n := len(st.PhaseHistory)
	if n > 0 && at.Before(&st.PhaseHistory[n-1].OccurredAt) {
		// The timeline stays in order even when a pod's clock or a late
		// observation says otherwise.
		at = st.PhaseHistory[n-1].OccurredAt
	}
	if n == 0 || st.PhaseHistory[n-1].Phase != name {
		entry := flytev1.PhaseTransition{Phase: name, OccurredAt: at}
		if t.err != nil && !t.final {
			// The condition and errorState carry the full text; the history
			// only a hint of an earlier attempt's error (the final one is in
			// both already).
			entry.Message = truncate(t.err.Message, maxHistoryMessage)
		}
		st.PhaseHistory = boundHistory(append(st.PhaseHistory, entry))
	}
	st.PluginPhase = string(t.phase)
	st.PluginPhaseVersion = version
	if t.err != nil {
		st.ErrorState = &flytev1.ErrorState{Code: t.err.Code, Kind: t.err.Kind, Message: truncate(t.err.Message, maxErrorMessage)}
	} else if t.final && t.phase == plugin.PhaseSucceeded {
		st.ErrorState = nil
	}
	msg := t.message
	if msg == "" && t.err != nil {
		msg = t.err.Message
	}
	switch {
	case t.final && t.phase == plugin.PhaseSucceeded:
		setCondition(st, flytev1.ConditionProgressing, metav1.ConditionFalse, name, "TaskAction has completed", recorded)
		setCondition(st, flytev1.ConditionSucceeded, metav1.ConditionTrue, name, msg, recorded)
	case t.final:
		// The message once in the Failed condition (and in full in errorState), not again here.
		setCondition(st, flytev1.ConditionProgressing, metav1.ConditionFalse, name, "TaskAction has ended: "+name, recorded)
		setCondition(st, flytev1.ConditionFailed, metav1.ConditionTrue, name, msg, recorded)
	default:
		setCondition(st, flytev1.ConditionProgressing, metav1.ConditionTrue, name, msg, recorded)
	}
}

// boundHistory keeps the first entry (when it all began) and the latest ones.
func boundHistory(h []flytev1.PhaseTransition) []flytev1.PhaseTransition {
	if len(h) <= maxHistory {
		return h
	}
	out := make([]flytev1.PhaseTransition, 0, maxHistory)
	out = append(out, h[0])
	return append(out, h[len(h)-maxHistory+1:]...)
}

// setCondition sets a condition; its lastTransitionTime is when the executor
// recorded the change, kept while the status does not change.
func setCondition(st *flytev1.TaskActionStatus, typ string, status metav1.ConditionStatus, reason, msg string, at metav1.Time) {
	if reason == "" {
		reason = flytev1.ReasonQueued
	}
	c := metav1.Condition{Type: typ, Status: status, Reason: reason, Message: truncate(msg, maxConditionMessage), LastTransitionTime: at}
	if old := meta.FindStatusCondition(st.Conditions, typ); old != nil && old.Status == status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// progressing is the Progressing condition, if any.
func progressing(st *flytev1.TaskActionStatus) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, flytev1.ConditionProgressing)
}

func truncate(s string, n int) string { return plugin.Truncate(s, n) }
