package envtest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	workflowpb "github.com/taskaction/executor/gen/flyteidl2/workflow"
)

// flyteStatus has exactly the status fields of Flyte's own TaskAction type
// (executor/api/v1 in flyteorg/flyte), as Flyte's actions service knows them.
type flyteStatus struct {
	StateJSON          string                 `json:"stateJson,omitempty"`
	PluginState        []byte                 `json:"pluginState,omitempty"`
	PluginStateVersion uint8                  `json:"pluginStateVersion,omitempty"`
	PluginPhase        string                 `json:"pluginPhase,omitempty"`
	PluginPhaseVersion uint32                 `json:"pluginPhaseVersion,omitempty"`
	Attempts           uint32                 `json:"attempts,omitempty"`
	SystemFailures     uint32                 `json:"systemFailures,omitempty"`
	CacheStatus        int32                  `json:"cacheStatus,omitempty"`
	Conditions         []metav1.Condition     `json:"conditions,omitempty"`
	PhaseHistory       []flytePhaseTransition `json:"phaseHistory,omitempty"`
	ErrorState         *flyteErrorState       `json:"errorState,omitempty"`
	SignalValue        []byte                 `json:"signalValue,omitempty"`
	SignalledBy        string                 `json:"signalledBy,omitempty"`
	SignalledAt        *metav1.Time           `json:"signalledAt,omitempty"`
}

type flytePhaseTransition struct {
	Phase      string      `json:"phase"`
	OccurredAt metav1.Time `json:"occurredAt"`
	Message    string      `json:"message,omitempty"`
}

type flyteErrorState struct {
	Code    string `json:"code,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message,omitempty"`
}

type flyteTaskAction struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              json.RawMessage `json:"spec"`
	Status            flyteStatus     `json:"status,omitempty"`
}

// flyteStatusUpdate does what Flyte's actions service does: read the object
// into its own type, change it, and write the whole status back with
// Status().Update. It returns the status before and after, as JSON.
func flyteStatusUpdate(t *testing.T, ns, name string, change func(*flyteStatus)) (before, after string) {
	t.Helper()
	ctx := context.Background()
	for try := 0; try < 10; try++ {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(flytev1.GroupVersion.WithKind("TaskAction"))
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		var f flyteTaskAction
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("Flyte's type cannot read the object: %v", err)
		}
		if change != nil {
			change(&f.Status)
		}
		out, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		back := &unstructured.Unstructured{}
		if err := json.Unmarshal(out, &back.Object); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Status().Update(ctx, back); err != nil {
			if apierrors.IsConflict(err) {
				continue
			}
			t.Fatalf("Flyte's status update: %v", err)
		}
		s1, _ := json.Marshal(u.Object["status"])
		s2, _ := json.Marshal(back.Object["status"])
		return string(s1), string(s2)
	}
	t.Fatal("Flyte's status update kept conflicting")
	return "", ""
}

// TestFlyteStatusWritersLoseNothing is issue 11, item 2: between the
// executor's steps, a writer that knows only Flyte's status fields rewrites
// the whole status; nothing the executor needs is lost (the status round-trips
// unchanged), and the TaskAction runs its course: a system failure, a user
// retry, a success.
func TestFlyteStatusWritersLoseNothing(t *testing.T) {
	ns := namespace(t)
	ta := validTaskAction(ns, "flyte")
	ta.Spec.Template.Retries = 1
	create(t, ta)
	roundTrip := func(when string) {
		t.Helper()
		before, after := flyteStatusUpdate(t, ns, "flyte", nil)
		if before != after {
			t.Errorf("%s: Flyte's type changed the status:\nbefore %s\nafter  %s", when, before, after)
		}
	}
	pod := waitPod(t, ns, "flyte-0")
	waitReason(t, ns, "flyte", flytev1.ConditionProgressing, flytev1.ReasonQueued)
	roundTrip("queued")
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Phase, s.Reason, s.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	})
	eventually(t, 10*time.Second, "system failure counted", func() bool { return get(t, ns, "flyte").Status.SystemFailures == 1 })
	roundTrip("after a system failure")
	eventually(t, 20*time.Second, "relaunched pod", func() bool {
		p := &corev1.Pod{}
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "flyte-0"}, p) == nil && p.UID != pod.UID
	})
	pod = waitPod(t, ns, "flyte-0")
	roundTrip("relaunched")
	setPodStatus(t, pod, podRunning(pod))
	waitReason(t, ns, "flyte", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	roundTrip("running")
	setPodStatus(t, pod, podTerminated(pod, corev1.PodFailed, 1, "Error", "boom"))
	pod2 := waitPod(t, ns, "flyte-1")
	roundTrip("second attempt")
	waitReason(t, ns, "flyte", flytev1.ConditionProgressing, flytev1.ReasonQueued)
	setPodStatus(t, pod2, podTerminated(pod2, corev1.PodSucceeded, 0, "Completed", ""))
	got := waitReason(t, ns, "flyte", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	roundTrip("succeeded")
	if got.Status.Attempts != 2 {
		t.Errorf("attempts = %d, want 2", got.Status.Attempts)
	}
	if p := phasesOf(eventsOf(ns, "flyte")); p != "1:QUEUED 1:QUEUED 1:RUNNING 2:QUEUED 2:QUEUED 2:SUCCEEDED" {
		t.Errorf("events = %s", p)
	}
}

// TestConditionSignalledByAFullStatusUpdate is issue 11, item 4: a
// condition action runs no pod, is Paused until Flyte's actions service
// writes the signal with a full status update, then Succeeded (Signaled).
func TestConditionSignalledByAFullStatusUpdate(t *testing.T) {
	ns := namespace(t)
	ta := validTaskAction(ns, "approve")
	ta.Spec.ActionType = flytev1.ActionTypeCondition
	ta.Spec.Template, ta.Spec.TaskType = nil, ""
	create(t, ta)
	waitReason(t, ns, "approve", flytev1.ConditionProgressing, flytev1.ReasonPaused)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	flyteStatusUpdate(t, ns, "approve", func(s *flyteStatus) {
		s.SignalValue, s.SignalledBy, s.SignalledAt = []byte{0x0a, 0x01, 0x31}, "alice", &now
	})
	got := waitReason(t, ns, "approve", flytev1.ConditionSucceeded, flytev1.ReasonSignaled)
	if string(got.Status.SignalValue) != "\x0a\x01\x31" || got.Status.SignalledBy != "alice" {
		t.Errorf("signal not kept: %+v", got.Status)
	}
	if p := phasesOf(eventsOf(ns, "approve")); p != "" { // as Flyte's executor: none for a condition
		t.Errorf("events = %s", p)
	}
	if n := len(pods(t, ns)); n != 0 || strings.Contains(strings.Join(got.Finalizers, ","), "flyte") {
		t.Errorf("a condition got %d pods or a finalizer %v", n, got.Finalizers)
	}
}

// TestConditionTimesOut: a condition action whose conditionSpec (Flyte's
// serialized ConditionAction) sets a timeout fails with TimedOut when no
// signal comes.
func TestConditionTimesOut(t *testing.T) {
	ns := namespace(t)
	spec, err := proto.Marshal(&workflowpb.ConditionAction{Name: "approve", Timeout: durationpb.New(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ta := validTaskAction(ns, "late")
	ta.Spec.ActionType = flytev1.ActionTypeCondition
	ta.Spec.Template, ta.Spec.TaskType = nil, ""
	ta.Spec.ConditionSpec = spec
	create(t, ta)
	waitReason(t, ns, "late", flytev1.ConditionProgressing, flytev1.ReasonPaused)
	got := waitReason(t, ns, "late", flytev1.ConditionFailed, flytev1.ReasonTimedOut)
	if es := got.Status.ErrorState; es == nil || es.Code != "Timeout" {
		t.Errorf("errorState = %+v", es)
	}
	if p := phasesOf(eventsOf(ns, "late")); p != "" {
		t.Errorf("events = %s", p)
	}
}
