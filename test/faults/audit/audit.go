// Package audit checks what a fault suite left behind, from three witnesses
// that do not depend on the executor's own account: the API server (the
// TaskActions and pods at the end, and its audit log of every write), the
// events store, and the events the events service acknowledged on the wire.
// Every check is a pure function of those records, so that a fabricated
// history proves it can fail.
package audit

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/common"
	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/pkg/controller"
	"github.com/taskaction/executor/pkg/plugin/container"
)

// Outcome is what a TaskAction of the mix is meant to end as.
type Outcome struct {
	Succeed  bool
	Attempts uint32
}

// PodCreate is one pod create the API server's audit log witnessed.
type PodCreate struct {
	Namespace, Name string
	// OwnerUID is the TaskAction the pod belongs to (its controller reference).
	OwnerUID string
	// Attempt is the pod's attempt label.
	Attempt string
	// Code is the HTTP status of the create (201: a pod was created).
	Code int
	User string
}

// World is what the suite collected at the end.
type World struct {
	// TaskActions are those the API server still has.
	TaskActions []flytev1.TaskAction
	// Deleted maps each TaskAction the suite deleted (namespace/name) to its
	// action (TaskActionKey): it must be gone, with exactly one ABORTED event.
	Deleted map[string]string
	// Expected outcomes by namespace/name (optional).
	Expected map[string]Outcome
	// Pods are the executor's pods (label flyte.org/managed=true) left at the end.
	Pods []corev1.Pod
	// PodCreates are every pod create in the audit log.
	PodCreates []PodCreate
	// Acked are the events of every Record call the events service answered 200.
	Acked []*workflow.ActionEvent
	// Stored is the events store's content.
	Stored []*workflow.ActionEvent
}

// Report holds the count of each defect; each must be zero.
type Report struct {
	StuckTaskActions      int
	HistoryWithoutAckedEv int
	AckedNotStored        int
	DuplicateIdentities   int
	SecondPodForAttempt   int
	LeakedPods            int
	FinalizersOnDeleted   int
	WrongOutcomes         int
	AbortedNotExactlyOne  int
	// Not defects: identical re-sends of an acknowledged event (at-least-once delivery).
	ResentIdentical int
	Details         []string
}

const maxDetails = 40

func (r *Report) add(count *int, format string, args ...any) {
	*count++
	if len(r.Details) < maxDetails {
		r.Details = append(r.Details, fmt.Sprintf(format, args...))
	}
}

// rows are the audits in print order.
func (r *Report) rows() []struct {
	name string
	n    int
} {
	return []struct {
		name string
		n    int
	}{
		{"stuck TaskActions", r.StuckTaskActions},
		{"phaseHistory entries without an acknowledged event", r.HistoryWithoutAckedEv},
		{"events acknowledged but not stored", r.AckedNotStored},
		{"duplicate event identities", r.DuplicateIdentities},
		{"second pod created for the same attempt", r.SecondPodForAttempt},
		{"leaked pods", r.LeakedPods},
		{"finalizers left on deleted TaskActions", r.FinalizersOnDeleted},
		{"wrong outcomes (result or attempts)", r.WrongOutcomes},
		{"deleted TaskActions without exactly one ABORTED event", r.AbortedNotExactlyOne},
	}
}

// Failures lists the audits whose count is not zero.
func (r *Report) Failures() []string {
	var out []string
	for _, row := range r.rows() {
		if row.n != 0 {
			out = append(out, fmt.Sprintf("%s: %d", row.name, row.n))
		}
	}
	return out
}

// Print writes every count, then the details.
func (r *Report) Print(w io.Writer) {
	for _, row := range r.rows() {
		fmt.Fprintf(w, "  %-58s %d\n", row.name, row.n)
	}
	fmt.Fprintf(w, "  %-58s %d\n", "(identical re-sends of acknowledged events, allowed)", r.ResentIdentical)
	for _, d := range r.Details {
		fmt.Fprintf(w, "    - %s\n", d)
	}
}

// Check runs every audit over w.
func Check(w World) *Report {
	r := &Report{}
	byUID := map[string]*flytev1.TaskAction{}
	for i := range w.TaskActions {
		ta := &w.TaskActions[i]
		byUID[string(ta.UID)] = ta
		key := ta.Namespace + "/" + ta.Name
		terminal := ta.Status.IsTerminal()
		switch {
		case w.Deleted[key] != "":
			r.add(&r.StuckTaskActions, "%s: deleted but still present (finalizers %v)", key, ta.Finalizers)
		case !terminal:
			r.add(&r.StuckTaskActions, "%s: not terminal (Progressing %s, attempts %d)", key, progressReason(ta), ta.Status.Attempts)
		}
		if ta.DeletionTimestamp != nil && containsString(ta.Finalizers, flytev1.Finalizer) {
			// The finalizer stays while a TaskAction exists; a deletion must release it.
			r.add(&r.FinalizersOnDeleted, "%s: deleted and still held by finalizer %s", key, flytev1.Finalizer)
		}
		if want, ok := w.Expected[key]; ok && terminal && w.Deleted[key] == "" {
			got := meta.IsStatusConditionTrue(ta.Status.Conditions, flytev1.ConditionSucceeded)
			if got != want.Succeed || ta.Status.Attempts != want.Attempts {
				r.add(&r.WrongOutcomes, "%s: succeeded=%v after %d attempts, want succeeded=%v after %d", key, got, ta.Status.Attempts, want.Succeed, want.Attempts)
			}
		}
	}
	checkHistory(r, w)
	checkEvents(r, w)
	checkPodCreates(r, w)
	checkPods(r, w, byUID)
	checkAborted(r, w)
	return r
}

// historyPhases maps a phaseHistory name to the event phases that report it.
var historyPhases = map[string][]common.ActionPhase{
	flytev1.ReasonQueued:       {common.ActionPhase_ACTION_PHASE_QUEUED, common.ActionPhase_ACTION_PHASE_WAITING_FOR_RESOURCES},
	flytev1.ReasonInitializing: {common.ActionPhase_ACTION_PHASE_INITIALIZING},
	flytev1.ReasonExecuting:    {common.ActionPhase_ACTION_PHASE_RUNNING},
	flytev1.ReasonCompleted:    {common.ActionPhase_ACTION_PHASE_SUCCEEDED},
	// A retried attempt's failure is reported as the next attempt's QUEUED.
	flytev1.ReasonRetryableFailure: {common.ActionPhase_ACTION_PHASE_QUEUED},
	flytev1.ReasonPermanentFailure: {common.ActionPhase_ACTION_PHASE_FAILED},
	flytev1.ReasonInvalidSpec:      {common.ActionPhase_ACTION_PHASE_FAILED},
	flytev1.ReasonPluginNotFound:   {common.ActionPhase_ACTION_PHASE_FAILED},
	flytev1.ReasonTimedOut:         {common.ActionPhase_ACTION_PHASE_TIMED_OUT, common.ActionPhase_ACTION_PHASE_FAILED},
	flytev1.ReasonAborted:          {common.ActionPhase_ACTION_PHASE_ABORTED},
}

// checkHistory: every phaseHistory entry of a TaskAction must be backed by a
// distinct acknowledged event of its action with a phase that reports it
// (the status may never run ahead of the events).
func checkHistory(r *Report, w World) {
	acked := map[string]map[common.ActionPhase]int{} // action key → phase → distinct identities
	seen := map[string]bool{}
	for _, e := range w.Acked {
		id := identity(e)
		if seen[id] {
			continue
		}
		seen[id] = true
		k := ActionKey(e.GetId())
		if acked[k] == nil {
			acked[k] = map[common.ActionPhase]int{}
		}
		acked[k][e.GetPhase()]++
	}
	stored := map[string]map[common.ActionPhase]int{}
	for _, e := range w.Stored {
		k := ActionKey(e.GetId())
		if stored[k] == nil {
			stored[k] = map[common.ActionPhase]int{}
		}
		stored[k][e.GetPhase()]++
	}
	for _, ta := range w.TaskActions {
		if es := ta.Status.ErrorState; es != nil && es.Code == controller.CodeDuplicateAction {
			// Refused for sharing another's identity: reporting under it would
			// be taken for the other's, so it reports nothing.
			continue
		}
		k := TaskActionKey(&ta)
		left := acked[k]
		storedLeft := stored[k]
		for i, h := range ta.Status.PhaseHistory {
			phases, known := historyPhases[h.Phase]
			matched, inStore := false, false
			for _, p := range phases {
				if left[p] > 0 {
					left[p]--
					matched = true
					break
				}
			}
			for _, p := range phases {
				if storedLeft[p] > 0 {
					storedLeft[p]--
					inStore = true
					break
				}
			}
			if !matched {
				why := "no acknowledged event of its phase"
				if inStore {
					// e.g. sent by a replica killed before the answer came back
					why += " (the store has one: its sender never got the acknowledgement)"
				}
				if !known {
					why = "a phase name the audit does not know"
				}
				r.add(&r.HistoryWithoutAckedEv, "%s/%s: phaseHistory[%d] %q: %s", ta.Namespace, ta.Name, i, h.Phase, why)
			}
		}
	}
}

// checkEvents: every acknowledged identity is stored; no identity is stored
// twice or acknowledged with two different contents.
func checkEvents(r *Report, w World) {
	stored := map[string]int{}
	for _, e := range w.Stored {
		stored[identity(e)]++
	}
	for id, n := range stored {
		if n > 1 {
			r.add(&r.DuplicateIdentities, "identity %s stored %d times", id, n)
		}
	}
	first := map[string]*workflow.ActionEvent{}
	missing := map[string]bool{}
	for _, e := range w.Acked {
		id := identity(e)
		if stored[id] == 0 && !missing[id] {
			missing[id] = true
			r.add(&r.AckedNotStored, "identity %s acknowledged, not in the store", id)
		}
		prev, ok := first[id]
		if !ok {
			first[id] = e
			continue
		}
		if sameContent(prev, e) {
			r.ResentIdentical++
		} else {
			r.add(&r.DuplicateIdentities, "identity %s acknowledged twice with different contents: %s", id, contentDiff(prev, e))
		}
	}
}

// sameContent compares two events but for the times, which a re-send recomputes.
func sameContent(a, b *workflow.ActionEvent) bool {
	a, b = proto.Clone(a).(*workflow.ActionEvent), proto.Clone(b).(*workflow.ActionEvent)
	for _, e := range []*workflow.ActionEvent{a, b} {
		clearTimes(e)
	}
	return proto.Equal(a, b)
}

// timeFields are when an event was made and sent, which a re-send recomputes.
var timeFields = map[protoreflect.Name]bool{"reported_time": true, "updated_time": true, "start_time": true, "end_time": true}

func clearTimes(e *workflow.ActionEvent) {
	m := e.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		if timeFields[fields.Get(i).Name()] {
			m.Clear(fields.Get(i))
		}
	}
}

// contentDiff names the fields in which two events differ (times aside).
func contentDiff(a, b *workflow.ActionEvent) string {
	var diffs []string
	ra, rb := a.ProtoReflect(), b.ProtoReflect()
	fields := ra.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		if timeFields[f.Name()] {
			continue
		}
		if va, vb := ra.Get(f), rb.Get(f); !va.Equal(vb) {
			diffs = append(diffs, fmt.Sprintf("%s %q / %q", f.Name(), short(fieldText(a, f)), short(fieldText(b, f))))
		}
	}
	return strings.Join(diffs, "; ")
}

// fieldText renders one field of e as text.
func fieldText(e *workflow.ActionEvent, f protoreflect.FieldDescriptor) string {
	if !e.ProtoReflect().Has(f) {
		return "(unset)"
	}
	if !f.IsList() && !f.IsMap() && f.Message() == nil {
		return fmt.Sprint(e.ProtoReflect().Get(f).Interface())
	}
	only := &workflow.ActionEvent{}
	only.ProtoReflect().Set(f, e.ProtoReflect().Get(f))
	return strings.TrimSpace(prototext.MarshalOptions{}.Format(only))
}

func short(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}

// checkPodCreates: at most one successful pod create per (TaskAction, attempt).
func checkPodCreates(r *Report, w World) {
	n := map[string]int{}
	for _, c := range w.PodCreates {
		if c.Code != 201 {
			continue
		}
		owner := c.OwnerUID
		if owner == "" {
			owner = "pod " + c.Namespace + "/" + c.Name
		}
		k := owner + " attempt " + c.Attempt
		n[k]++
		if n[k] == 2 {
			r.add(&r.SecondPodForAttempt, "%s/%s: a second pod for TaskAction %s attempt %s (by %s)", c.Namespace, c.Name, owner, c.Attempt, c.User)
		} else if n[k] > 2 {
			r.SecondPodForAttempt++
		}
	}
}

// checkPods: a pod left at the end must be finished unless it is the current
// attempt of a running TaskAction; an unfinished one must belong to a
// TaskAction that exists.
func checkPods(r *Report, w World, byUID map[string]*flytev1.TaskAction) {
	for _, p := range w.Pods {
		key := p.Namespace + "/" + p.Name
		owner := ""
		for _, ref := range p.OwnerReferences {
			if ref.Kind == "TaskAction" {
				owner = string(ref.UID)
			}
		}
		if p.DeletionTimestamp != nil {
			continue // the executor asked for its deletion; the kubelet (kwok) finishes it
		}
		ta := byUID[owner]
		finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		switch {
		case finished && (ta == nil || ta.DeletionTimestamp != nil || w.Deleted[ta.Namespace+"/"+ta.Name] != ""):
			// Kubernetes' garbage collector removes it with its owner (the
			// rig runs none); the executor stops only what still runs.
		case ta == nil:
			r.add(&r.LeakedPods, "%s: %s and its TaskAction (uid %q) is gone", key, p.Status.Phase, owner)
		case ta.DeletionTimestamp != nil || w.Deleted[ta.Namespace+"/"+ta.Name] != "":
			r.add(&r.LeakedPods, "%s: %s and its TaskAction %s was deleted", key, p.Status.Phase, ta.Name)
		case ta.Status.IsTerminal() && !finished:
			r.add(&r.LeakedPods, "%s: %s while its TaskAction %s is terminal", key, p.Status.Phase, ta.Name)
		case !ta.Status.IsTerminal() && !finished && p.Labels[container.LabelAttempt] != fmt.Sprint(ta.Status.Attempts):
			r.add(&r.LeakedPods, "%s: attempt %s %s while %s is at attempt %d", key, p.Labels[container.LabelAttempt], p.Status.Phase, ta.Name, ta.Status.Attempts)
		}
	}
}

// checkAborted: each deleted TaskAction has exactly one ABORTED event stored.
func checkAborted(r *Report, w World) {
	if len(w.Deleted) == 0 {
		return
	}
	aborted := map[string]int{}
	for _, e := range w.Stored {
		if e.GetPhase() == common.ActionPhase_ACTION_PHASE_ABORTED {
			aborted[ActionKey(e.GetId())]++
		}
	}
	keys := make([]string, 0, len(w.Deleted))
	for k := range w.Deleted {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if n := aborted[w.Deleted[k]]; n != 1 {
			r.add(&r.AbortedNotExactlyOne, "%s: %d ABORTED events", k, n)
		}
	}
}

func identity(e *workflow.ActionEvent) string {
	return fmt.Sprintf("%s attempt %d %s v%d", ActionKey(e.GetId()), e.GetAttempt(), strings.TrimPrefix(e.GetPhase().String(), "ACTION_PHASE_"), e.GetVersion())
}

// ActionKey names an action: org/project/domain/run/action.
func ActionKey(id *common.ActionIdentifier) string {
	r := id.GetRun()
	return r.GetOrg() + "/" + r.GetProject() + "/" + r.GetDomain() + "/" + r.GetName() + "/" + id.GetName()
}

// TaskActionKey is the ActionKey of a TaskAction's events (the executor sends
// no org, as Flyte's own executor does not).
func TaskActionKey(ta *flytev1.TaskAction) string {
	return ActionKey(&common.ActionIdentifier{Run: &common.RunIdentifier{Project: ta.Spec.Project,
		Domain: ta.Spec.Domain, Name: ta.Spec.RunName}, Name: ta.Spec.ActionName})
}

func progressReason(ta *flytev1.TaskAction) string {
	if c := meta.FindStatusCondition(ta.Status.Conditions, flytev1.ConditionProgressing); c != nil {
		return c.Reason
	}
	return "unset"
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
