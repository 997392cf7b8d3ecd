package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// t0 is when the test TaskActions are created.
var t0 = time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)

var testDecider = decider{Cluster: "c1", MaxSystemFailures: 3, Backoff: 10 * time.Second, Safety: 5 * time.Minute}

// newTA is a valid task action "hello" (retries as given) with the finalizer on.
func newTA(retries int32) *flytev1.TaskAction {
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hello", UID: "ta-uid", CreationTimestamp: metav1.NewTime(t0),
			Finalizers: []string{flytev1.Finalizer}},
		Spec: flytev1.TaskActionSpec{
			RunName: "run1", Project: "p", Domain: "d", ActionName: "hello", TaskType: "container",
			InputURI: "s3://b/run1/hello/inputs.pb", RunOutputBase: "s3://b/run1",
			Template: &flytev1.TypedTaskTemplate{ID: flytev1.TaskID{Name: "t", Version: "v1"}, Retries: retries,
				Container: &flytev1.Container{Image: "busybox"}},
		},
	}
}

// worldOf gathers the TaskAction with pod as its current attempt's pod.
func worldOf(t testing.TB, ta *flytev1.TaskAction, pod resource) World {
	t.Helper()
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		tk = nil
	}
	if pod.Name == "" {
		pod.Name = fmt.Sprintf("%s-%d", ta.Name, max(ta.Status.Attempts, 1)-1)
	}
	return World{TA: ta, Task: tk, SpecErr: specError(ta, tk, err), Pod: pod}
}

// ours is a pod of this TaskAction with the given observation.
func ours(uid string, created time.Time, obs plugin.Observation) resource {
	return resource{Holder: holderUs, UID: types.UID(uid), Created: created, Obs: obs}
}

func running(at time.Time) plugin.Observation {
	return plugin.Observation{Phase: plugin.PhaseRunning, OccurredAt: at}
}

func succeeded(at time.Time) plugin.Observation {
	return plugin.Observation{Phase: plugin.PhaseSucceeded, Finished: true, OccurredAt: at}
}

func userFailure(at time.Time) plugin.Observation {
	return plugin.Observation{Phase: plugin.PhaseRetryableFailure, Finished: true, OccurredAt: at, Message: "exit 1",
		Error: &plugin.ExecError{Code: "Error", Kind: flytev1.ErrorKindUser, Message: "container task terminated with exit code 1"}}
}

func evicted(at time.Time) plugin.Observation {
	return plugin.Observation{Phase: plugin.PhaseRetryableFailure, Finished: true, OccurredAt: at,
		Error: &plugin.ExecError{Code: "Evicted", Kind: flytev1.ErrorKindSystem, Message: "pod was evicted"}}
}

// withStatus returns ta after the plan's status and metadata took effect.
func applied(ta *flytev1.TaskAction, p Plan) *flytev1.TaskAction {
	out := ta.DeepCopy()
	out.Status = *p.Status.DeepCopy()
	if p.AddFinalizer && !hasString(out.Finalizers, flytev1.Finalizer) {
		out.Finalizers = append(out.Finalizers, flytev1.Finalizer)
	}
	if p.RemoveFinalizer {
		out.Finalizers = nil
	}
	return out
}

func hasString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// evs renders events as "attempt:PHASE:vVERSION", the version without its
// epoch (the same for every event of one TaskAction; TestIdentityEpoch).
func evs(l []events.Event) string {
	var s []string
	for _, e := range l {
		s = append(s, fmt.Sprintf("%d:%s:v%d", e.Attempt, e.Phase, uint32(e.Version)&(1<<15-1)))
	}
	return strings.Join(s, " ")
}

func history(st flytev1.TaskActionStatus) string {
	var s []string
	for _, h := range st.PhaseHistory {
		s = append(s, h.Phase)
	}
	return strings.Join(s, ",")
}

func stateOf(t testing.TB, st flytev1.TaskActionStatus) attemptState {
	t.Helper()
	var s attemptState
	if len(st.PluginState) > 0 {
		if err := json.Unmarshal(st.PluginState, &s); err != nil {
			t.Fatalf("pluginState %q: %v", st.PluginState, err)
		}
	}
	return s
}

func podWaiting(reason string) plugin.Observation {
	return plugin.Observation{Phase: plugin.PhasePermanentFailure, Message: reason,
		Error: &plugin.ExecError{Code: reason, Kind: flytev1.ErrorKindUser, Message: "container task: " + reason}}
}

var _ = corev1.PodRunning

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func ptrTo[T any](v T) *T { return &v }

// fakeQueue stands in for the controller's work queue: so many TaskActions
// wait in it, and it records what is added.
type fakeQueue struct {
	waiting  int
	added    []reconcile.Request
	priority []int
}

func (q *fakeQueue) Len() int { return q.waiting }

func (q *fakeQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, it := range items {
		q.added = append(q.added, it)
		q.priority = append(q.priority, ptr.Deref(o.Priority, 0))
	}
}

func (r *Reconciler) setQueue(q *fakeQueue) {
	var wq workQueue = q
	r.queue.Store(&wq)
}
