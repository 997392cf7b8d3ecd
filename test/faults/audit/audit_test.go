package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/common"
	"github.com/taskaction/executor/gen/flyteidl2/workflow"
)

func ev(action string, attempt uint32, phase common.ActionPhase, version uint32) *workflow.ActionEvent {
	return &workflow.ActionEvent{Id: &common.ActionIdentifier{Run: &common.RunIdentifier{Project: "p", Domain: "d", Name: "r"}, Name: action},
		Attempt: attempt, Phase: phase, Version: version, Cluster: "c1"}
}

// cleanWorld is one TaskAction that succeeded on its first attempt, as every
// witness should see it.
func cleanWorld() World {
	ta := flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: types.UID("uid-a")},
		Spec:       flytev1.TaskActionSpec{Project: "p", Domain: "d", RunName: "r", ActionName: "a"},
		Status: flytev1.TaskActionStatus{
			Attempts:   1,
			Conditions: []metav1.Condition{{Type: flytev1.ConditionSucceeded, Status: metav1.ConditionTrue, Reason: flytev1.ReasonCompleted}},
			PhaseHistory: []flytev1.PhaseTransition{
				{Phase: flytev1.ReasonQueued}, {Phase: flytev1.ReasonExecuting}, {Phase: flytev1.ReasonCompleted}},
		},
	}
	evs := []*workflow.ActionEvent{
		ev("a", 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0), ev("a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0), ev("a", 1, common.ActionPhase_ACTION_PHASE_SUCCEEDED, 0)}
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-0", Labels: map[string]string{"attempt": "1"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "TaskAction", Name: "a", UID: "uid-a"}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded},
	}
	return World{
		TaskActions: []flytev1.TaskAction{ta},
		Expected:    map[string]Outcome{"ns/a": {Succeed: true, Attempts: 1}},
		Pods:        []corev1.Pod{pod},
		PodCreates:  []PodCreate{{Namespace: "ns", Name: "a-0", OwnerUID: "uid-a", Attempt: "1", Code: 201}},
		Acked:       evs,
		Stored:      evs,
	}
}

func TestCheckCleanWorldPasses(t *testing.T) {
	r := Check(cleanWorld())
	if f := r.Failures(); len(f) != 0 {
		t.Fatalf("a clean world fails: %v %v", f, r.Details)
	}
}

// Each fabricated defect must raise its audit's count, and only that one.
func TestCheckEachAuditCanFail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(w *World)
		count  func(r *Report) int
	}{
		{"not terminal", func(w *World) {
			w.TaskActions[0].Status.Conditions = []metav1.Condition{{Type: flytev1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: flytev1.ReasonExecuting}}
			w.Pods[0].Status.Phase = corev1.PodRunning
		}, func(r *Report) int { return r.StuckTaskActions }},
		{"deleted yet present", func(w *World) {
			w.Deleted = map[string]string{"ns/a": "/p/d/r/a"}
			w.Pods = nil
			w.Stored = append(w.Stored, ev("a", 1, common.ActionPhase_ACTION_PHASE_ABORTED, 0))
			w.Acked = w.Stored
		}, func(r *Report) int { return r.StuckTaskActions }},
		{"status ahead of the events", func(w *World) {
			w.Acked = w.Acked[:2]
			w.Stored = w.Stored[:2]
		}, func(r *Report) int { return r.HistoryWithoutAckedEv }},
		{"history name the audit does not know", func(w *World) {
			w.TaskActions[0].Status.PhaseHistory = append(w.TaskActions[0].Status.PhaseHistory, flytev1.PhaseTransition{Phase: "Mystery"})
		}, func(r *Report) int { return r.HistoryWithoutAckedEv }},
		{"acknowledged, lost by the store", func(w *World) {
			w.Stored = w.Stored[1:]
		}, func(r *Report) int { return r.AckedNotStored }},
		{"identity stored twice", func(w *World) {
			w.Stored = append(w.Stored, ev("a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0))
		}, func(r *Report) int { return r.DuplicateIdentities }},
		{"identity acknowledged with another content", func(w *World) {
			other := ev("a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0)
			other.Cluster = "someone-else"
			w.Acked = append(w.Acked, other)
		}, func(r *Report) int { return r.DuplicateIdentities }},
		{"second pod for the same attempt", func(w *World) {
			w.PodCreates = append(w.PodCreates, PodCreate{Namespace: "ns", Name: "a-0-bis", OwnerUID: "uid-a", Attempt: "1", Code: 201})
		}, func(r *Report) int { return r.SecondPodForAttempt }},
		{"running pod of a TaskAction that is gone", func(w *World) {
			w.Pods[0].OwnerReferences[0].UID = "uid-gone"
			w.Pods[0].Status.Phase = corev1.PodRunning
		}, func(r *Report) int { return r.LeakedPods }},
		{"pod running after the end", func(w *World) {
			w.Pods[0].Status.Phase = corev1.PodRunning
		}, func(r *Report) int { return r.LeakedPods }},
		{"finalizer on a deleted TaskAction", func(w *World) {
			w.TaskActions[0].Finalizers = []string{flytev1.Finalizer}
			w.TaskActions[0].DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		}, func(r *Report) int { return r.FinalizersOnDeleted }},
		{"failed where it should succeed", func(w *World) {
			w.TaskActions[0].Status.Conditions = []metav1.Condition{{Type: flytev1.ConditionFailed, Status: metav1.ConditionTrue, Reason: flytev1.ReasonPermanentFailure}}
			w.TaskActions[0].Status.PhaseHistory[2].Phase = flytev1.ReasonPermanentFailure
			w.Pods[0].Status.Phase = corev1.PodFailed
			for _, e := range w.Stored {
				if e.Phase == common.ActionPhase_ACTION_PHASE_SUCCEEDED {
					e.Phase = common.ActionPhase_ACTION_PHASE_FAILED
				}
			}
		}, func(r *Report) int { return r.WrongOutcomes }},
		{"deleted with two ABORTED events", func(w *World) {
			w.TaskActions, w.Pods = nil, nil
			w.Deleted = map[string]string{"ns/a": "/p/d/r/a"}
			w.Stored = append(w.Stored, ev("a", 1, common.ActionPhase_ACTION_PHASE_ABORTED, 0), ev("a", 1, common.ActionPhase_ACTION_PHASE_ABORTED, 1))
			w.Acked = w.Stored
		}, func(r *Report) int { return r.AbortedNotExactlyOne }},
		{"deleted without an ABORTED event", func(w *World) {
			w.TaskActions, w.Pods = nil, nil
			w.Deleted = map[string]string{"ns/a": "/p/d/r/a"}
		}, func(r *Report) int { return r.AbortedNotExactlyOne }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := cleanWorld()
			tc.break_(&w)
			r := Check(w)
			if got := tc.count(r); got != 1 {
				t.Fatalf("count = %d, want 1; report %v %v", got, r.Failures(), r.Details)
			}
			if f := r.Failures(); len(f) != 1 {
				t.Fatalf("other audits failed too: %v %v", f, r.Details)
			}
		})
	}
}

func TestIdenticalResendIsAllowed(t *testing.T) {
	w := cleanWorld()
	w.Acked = append(w.Acked, ev("a", 1, common.ActionPhase_ACTION_PHASE_SUCCEEDED, 0))
	r := Check(w)
	if f := r.Failures(); len(f) != 0 || r.ResentIdentical != 1 {
		t.Fatalf("failures %v, re-sends %d", f, r.ResentIdentical)
	}
}

func TestParseAPILogAndDuplicatePodCreate(t *testing.T) {
	// Two successful creates of the same attempt's pod (a name reused after a
	// delete), one refused create, and a status patch.
	log := `{"kind":"Event","level":"Request","stage":"ResponseComplete","verb":"create","user":{"username":"exec"},"userAgent":"executor","objectRef":{"resource":"pods","namespace":"ns","name":"a-0","apiVersion":"v1"},"responseStatus":{"code":201},"requestObject":{"metadata":{"name":"a-0","labels":{"attempt":"1"},"ownerReferences":[{"apiVersion":"flyte.org/v1","kind":"TaskAction","name":"a","uid":"uid-a"}]}},"requestReceivedTimestamp":"2026-01-01T00:00:01.000000Z"}
{"kind":"Event","level":"Request","stage":"ResponseComplete","verb":"create","user":{"username":"exec"},"objectRef":{"resource":"pods","namespace":"ns","name":"a-0","apiVersion":"v1"},"responseStatus":{"code":409},"requestObject":{"metadata":{"name":"a-0","labels":{"attempt":"1"},"ownerReferences":[{"kind":"TaskAction","name":"a","uid":"uid-a"}]}},"requestReceivedTimestamp":"2026-01-01T00:00:02.000000Z"}
{"kind":"Event","level":"Request","stage":"ResponseComplete","verb":"create","user":{"username":"exec"},"objectRef":{"resource":"pods","namespace":"ns","name":"a-0","apiVersion":"v1"},"responseStatus":{"code":201},"requestObject":{"metadata":{"name":"a-0","labels":{"attempt":"1"},"ownerReferences":[{"kind":"TaskAction","name":"a","uid":"uid-a"}]}},"requestReceivedTimestamp":"2026-01-01T00:00:03.000000Z"}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"patch","user":{"username":"exec"},"objectRef":{"resource":"taskactions","namespace":"ns","name":"a","apiGroup":"flyte.org","subresource":"status"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:04.000000Z"}
`
	reqs, err := ParseAPILog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	w := cleanWorld()
	w.PodCreates = PodCreates(reqs)
	if len(w.PodCreates) != 3 || w.PodCreates[0].OwnerUID != "uid-a" || w.PodCreates[0].Attempt != "1" {
		t.Fatalf("pod creates: %+v", w.PodCreates)
	}
	r := Check(w)
	if r.SecondPodForAttempt != 1 || len(r.Failures()) != 1 {
		t.Fatalf("second pod = %d; %v %v", r.SecondPodForAttempt, r.Failures(), r.Details)
	}
}

func TestReadAPILogLeavesOutALineBeingWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	full := `{"stage":"ResponseComplete","verb":"delete","user":{"username":"u"},"objectRef":{"resource":"pods","namespace":"ns","name":"p"},"responseStatus":{"code":200}}` + "\n"
	if err := os.WriteFile(path, []byte(full+`{"stage":"ResponseComplete","verb":"cre`), 0o600); err != nil {
		t.Fatal(err)
	}
	reqs, err := ReadAPILog(path)
	if err != nil || len(reqs) != 1 || reqs[0].Verb != "delete" {
		t.Fatalf("%v %+v", err, reqs)
	}
	// A broken line in the middle is an error, not something to skip.
	if err := os.WriteFile(path, []byte("{not json\n"+full), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAPILog(path); err == nil {
		t.Fatal("a broken complete line was accepted")
	}
}

func TestWritesWithoutLease(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	lease := func(user string, s float64, code int) APIRequest {
		return APIRequest{User: user, Verb: "update", Resource: "leases", Name: "L", Code: code, At: at(s)}
	}
	write := func(user string, s float64) APIRequest {
		return APIRequest{User: user, Verb: "create", Resource: "pods", Namespace: "ns", Name: "p", Code: 201, At: at(s)}
	}
	const d = 15 * time.Second
	reqs := []APIRequest{
		lease("a", 0, 200), lease("a", 2, 200), write("a", 3), lease("b", 4, 409), // b tries, a holds
		lease("a", 4, 200), write("a", 10),
		// a killed after 4: its term ends at 19; b takes over at 20.
		lease("b", 20, 200), write("b", 21), lease("b", 22, 200),
	}
	if n, det := WritesWithoutLease(reqs, []string{"a", "b"}, "L", d); n != 0 {
		t.Fatalf("clean failover: %d writes without the lease: %v", n, det)
	}
	terms := LeaseTerms(reqs, "L", d)
	if len(terms) != 2 || terms[0].Holder != "a" || !terms[0].Till.Equal(at(19)) || terms[1].Holder != "b" || !terms[1].From.Equal(at(20)) {
		t.Fatalf("terms: %+v", terms)
	}
	// The standby writing before it holds the lease, and the old leader
	// writing after its term: both counted.
	bad := append(append([]APIRequest{}, reqs...), write("b", 5), write("a", 19.5))
	if n, det := WritesWithoutLease(bad, []string{"a", "b"}, "L", d); n != 2 {
		t.Fatalf("%d writes without the lease, want 2: %v", n, det)
	}
}

func TestContentDiffNamesTheField(t *testing.T) {
	a, b := ev("a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0), ev("a", 1, common.ActionPhase_ACTION_PHASE_RUNNING, 0)
	b.Cluster = "other"
	b.ClusterEvents = []*workflow.ClusterEvent{{Message: "pulled"}}
	if d := contentDiff(a, b); !strings.Contains(d, `cluster "c1" / "other"`) || !strings.Contains(d, "pulled") {
		t.Fatalf("diff %q", d)
	}
}
