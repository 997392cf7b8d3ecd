package controller

import (
	"time"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

func identified(ta *flytev1.TaskAction) bool {
	s := ta.Spec
	return s.Project != "" && s.Domain != "" && s.RunName != "" && s.ActionName != ""
}

// report records transition t in the status and queues the event that
// reports it; apply sends the event before it writes the status.
func (d decider) report(p *Plan, w World, now time.Time, t transition) {
	st := &p.Status
	st.Attempts = t.attempt
	ver := eventVersion(st, identityEpoch(w.TA), t.attempt, eventPhase(t))
	p.Events = append(p.Events, d.event(w, st, t, ver))
	record(st, t, ver, now)
	p.Recorded = append(p.Recorded, historyName(t))
}

// event builds the event of transition t.
func (d decider) event(w World, st *flytev1.TaskActionStatus, t transition, version uint32) events.Event {
	ta := w.TA
	ev := events.Event{
		Project: ta.Spec.Project, Domain: ta.Spec.Domain, Run: ta.Spec.RunName, Action: ta.Spec.ActionName,
		Attempt: int32(t.attempt), Phase: eventPhase(t), Version: int32(version),
		UpdatedAt: t.at.UTC(), Cluster: d.Cluster, CacheStatus: st.CacheStatus.String(),
	}
	launched := w.Pod.Holder == holderUs || readState(&w.TA.Status, t.attempt).Pod != "" ||
		(w.LaunchInFlight != nil && w.LaunchInFlight.Attempt == t.attempt)
	if t.attempt == max(w.TA.Status.Attempts, 1) && launched {
		// The attempt's pod, whether or not it is still there when the event is (re-)sent.
		ev.PodName = w.Pod.Name
		if w.Pod.Holder == holderUs && w.Pod.Logs != nil {
			logs := w.Pod.Logs()
			ev.LogLinks = linksFor(logs.Links, ev.Phase)
			if !t.podCreated {
				ev.LogContext = logs.Context
			}
		}
	}
	if ta.Spec.ParentActionName != nil {
		ev.ParentAction = *ta.Spec.ParentActionName
	}
	if prefix := task.OutputPrefix(ta, int32(t.attempt)); prefix != "" {
		ev.OutputURI, ev.ReportURI = prefix+"/outputs.pb", prefix+"/report.html"
	}
	if t.outputURI != "" {
		ev.OutputURI = t.outputURI
	}
	if src := t.cacheSource; src != nil {
		ev.CacheSource = &events.CacheSource{Org: src.Org, Project: src.Project, Domain: src.Domain,
			Run: src.Run, Action: src.Action, Attempt: int32(src.Attempt)}
	}
	if t.err != nil {
		ev.Error = &events.ErrorInfo{Code: t.err.Code, Kind: string(t.err.Kind), Message: t.err.Message}
	}
	if t.message != "" {
		ev.ClusterEvents = []events.ClusterEvent{{OccurredAt: t.at.UTC(), Message: t.message}}
	}
	return ev
}

// occurred is when an observed phase began: the observation's time, else
// fallback (the pod's creation), never later than now.
func occurred(obs plugin.Observation, fallback, now time.Time) time.Time {
	at := obs.OccurredAt
	if at.IsZero() {
		at = fallback
	}
	if at.IsZero() || at.After(now) {
		return now
	}
	return at
}

// eventPhase maps a transition to the phase an event reports.
func eventPhase(t transition) events.Phase {
	if t.paused {
		return events.PhasePaused
	}
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

// phaseOrdinal numbers the event phases for versions (at most 15).
func phaseOrdinal(p events.Phase) uint32 {
	switch p {
	case events.PhaseQueued:
		return 1
	case events.PhaseWaitingForResources:
		return 2
	case events.PhaseInitializing:
		return 3
	case events.PhaseRunning:
		return 4
	case events.PhaseSucceeded:
		return 5
	case events.PhaseFailed:
		return 6
	case events.PhaseAborted:
		return 7
	case events.PhaseTimedOut:
		return 8
	case events.PhasePaused:
		return 9
	}
	return 15
}

// An event's version: the epoch of the TaskAction's identity in 16 bits, a
// sequence number in the next 11, the phase in the low 4: 31 bits, as the
// status's pluginPhaseVersion is an int32 in the API.
const (
	versionPhaseBits = 4
	versionSeqBits   = 11
	versionSeqMax    = 1<<versionSeqBits - 1
	versionEpochMask = 1<<16 - 1
)

// identityEpoch tells apart the incarnations of one action identity
// (project, domain, run, action): a TaskAction deleted and created again under
// the same identity numbers its events from its own creation second, so the
// events service neither drops them as duplicates of the earlier one's nor
// ranks them below (its latest event of an attempt is the highest version).
// Creation seconds count modulo 2^16 (about 18 hours): within that window a
// later incarnation ranks above an earlier one; beyond it the ranking wraps,
// and two incarnations created a multiple of 2^16 s apart, to the second,
// share an epoch, so the later one's events that match an earlier one's in
// attempt, sequence and phase are dropped as duplicates (1 chance in 65,536
// for a re-creation at a random time more than 18 hours later). Nothing the
// executor can see tells such incarnations apart (the earlier one is long
// gone), and the version has no bits to spare (31, an int32 in the API). The
// same second twice is ruled out: see releaseHold and duplicateOf.
func identityEpoch(ta *flytev1.TaskAction) uint32 {
	if ta.CreationTimestamp.IsZero() {
		return 0
	}
	return uint32(ta.CreationTimestamp.Unix()) & versionEpochMask
}

// eventVersion numbers the next event of attempt: the identity's epoch, a
// sequence number derived from the durable status, and the phase. An event
// re-sent after a crash before its status write carries the same version
// again (the service stores it once), and two different phases of one attempt
// never share a version, whatever crashed in between.
func eventVersion(st *flytev1.TaskActionStatus, epoch, attempt uint32, p events.Phase) uint32 {
	seq := uint32(0)
	if st.Attempts == attempt && st.PluginPhase != "" {
		seq = min(versionSeq(st.PluginPhaseVersion)+1, versionSeqMax)
	}
	return epoch<<(versionSeqBits+versionPhaseBits) | seq<<versionPhaseBits | phaseOrdinal(p)
}

// versionSeq is the sequence number of a recorded version.
func versionSeq(v uint32) uint32 { return v >> versionPhaseBits & versionSeqMax }
