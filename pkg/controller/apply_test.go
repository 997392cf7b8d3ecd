package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
)

// errCrash is the process dying right after a write took effect.
var errCrash = errors.New("simulated crash")

// rig is a fake API server, events service and kubelet around a reconciler
// whose every write can be the last one before a crash.
type rig struct {
	t     *testing.T
	store client.WithWatch
	clock *clocktesting.FakeClock
	svc   *dedupService
	// crashAfter is the write after which the process dies (0: never).
	crashAfter int
	// failAt is the attempted write that fails without effect, once (0: none).
	failAt, attempted int
	writes            int
	crashed           bool
	// gen is the running process; dead is the one that crashed: its later
	// writes never happen.
	gen, dead int
	uids      int
	mu        sync.Mutex
}

// dedupService stores each event identity once, as the events service does.
type dedupService struct {
	r     *rig
	seen  map[string]bool
	order []string
	first map[string]events.Event
	// differ lists identities re-sent with other contents (times aside).
	differ []string
	// calls counts every Record, re-sends included.
	calls int
}

func identity(e events.Event) string {
	return fmt.Sprintf("%d:%s:v%d", e.Attempt, e.Phase, e.Version)
}

func (d *dedupService) Record(_ context.Context, e events.Event) error {
	if err := d.r.refuse(); err != nil {
		return err
	}
	d.calls++
	id := identity(e)
	if !d.seen[id] {
		d.seen[id] = true
		d.order = append(d.order, id)
		d.first[id] = e
	} else if a, b := d.first[id], e; !reflect.DeepEqual(withoutTimes(a), withoutTimes(b)) {
		d.differ = append(d.differ, fmt.Sprintf("%s: %+v / %+v", id, withoutTimes(a), withoutTimes(b)))
	}
	return d.r.wrote()
}

// withoutTimes drops what a re-send may recompute: when it was sent, when
// the transition was seen, and where the logs are (rendered from the pod as
// seen at the re-send, which may be gone by then).
func withoutTimes(e events.Event) events.Event {
	e.UpdatedAt, e.ReportedAt = time.Time{}, time.Time{}
	e.LogLinks, e.LogContext = nil, nil
	return e
}

// wrote counts a write that took effect and crashes after the chosen one.
func (r *rig) wrote() error {
	r.writes++
	if r.crashAfter > 0 && r.writes == r.crashAfter && !r.crashed {
		r.crashed, r.dead = true, r.gen
		return errCrash
	}
	return nil
}

func (r *rig) isDead() bool { return r.crashed && r.dead == r.gen }

// errRefused is a write the API server or the events service refused.
var errRefused = apierrors.NewServiceUnavailable("refused once by the test")

// refuse says whether this attempted write is the one that fails.
func (r *rig) refuse() error {
	if r.isDead() {
		return errCrash
	}
	r.attempted++
	if r.failAt > 0 && r.attempted == r.failAt {
		return errRefused
	}
	return nil
}

func newRig(t *testing.T, crashAfter int) *rig {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := flytev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, clock: clocktesting.NewFakeClock(t0), crashAfter: crashAfter}
	r.svc = &dedupService{r: r, seen: map[string]bool{}, first: map[string]events.Event{}}
	r.store = fake.NewClientBuilder().WithScheme(s).
		WithStatusSubresource(&flytev1.TaskAction{}, &corev1.Pod{}).
		WithIndex(&corev1.Pod{}, ownerIndex, controllerUID).
		WithIndex(&flytev1.TaskAction{}, identityIndex, actionIdentity).
		Build()
	return r
}

// client is what the reconciler writes through: UIDs and creation times as
// the API server sets them, UID preconditions honoured, every write counted.
func (r *rig) client() client.Client {
	return interceptor.NewClient(r.store, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := r.refuse(); err != nil {
				return err
			}
			r.uids++
			obj.SetUID(types.UID(fmt.Sprintf("uid-%d", r.uids)))
			obj.SetCreationTimestamp(metav1.NewTime(r.clock.Now()))
			if err := c.Create(ctx, obj, opts...); err != nil {
				return err
			}
			return r.wrote()
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := r.refuse(); err != nil {
				return err
			}
			do := &client.DeleteOptions{}
			do.ApplyOptions(opts)
			if do.Preconditions != nil && do.Preconditions.UID != nil {
				cur := obj.DeepCopyObject().(client.Object)
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
					return err
				}
				if cur.GetUID() != *do.Preconditions.UID {
					return apierrors.NewConflict(corev1.Resource("pods"), obj.GetName(), errors.New("UID precondition failed"))
				}
			}
			if err := c.Delete(ctx, obj, opts...); err != nil {
				return err
			}
			return r.wrote()
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if err := r.refuse(); err != nil {
				return err
			}
			if err := c.Patch(ctx, obj, p, opts...); err != nil {
				return err
			}
			return r.wrote()
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := r.refuse(); err != nil {
				return err
			}
			if err := c.SubResource(sub).Patch(ctx, obj, p, opts...); err != nil {
				return err
			}
			return r.wrote()
		},
	})
}

// reconciler is a freshly started process (no memory of earlier writes).
func (r *rig) reconciler() *Reconciler {
	r.gen++
	reg := plugin.NewRegistry()
	reg.SetDefault(container.New())
	c := r.client()
	return &Reconciler{Client: c, APIReader: r.store, Registry: reg, Recorder: r.svc, Clock: r.clock,
		Options: Options{Cluster: "c1", MaxSystemFailures: 3, RequeueDuration: 10 * time.Second},
		memory:  newProcessMemory()}
}

// createTA stores ta as a user would create it (not one of the executor's writes).
func (r *rig) createTA(ta *flytev1.TaskAction) {
	ta.Finalizers, ta.UID, ta.CreationTimestamp = nil, "ta-uid", metav1.NewTime(r.clock.Now())
	if err := r.store.Create(context.Background(), ta); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) ta() (*flytev1.TaskAction, bool) {
	ta := &flytev1.TaskAction{}
	err := r.store.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "hello"}, ta)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return ta, true
}

func (r *rig) pod(name string) (*corev1.Pod, bool) {
	p := &corev1.Pod{}
	if err := r.store.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, p); err != nil {
		return nil, false
	}
	return p, true
}

func (r *rig) setPod(p *corev1.Pod, phase corev1.PodPhase, reason string, exit int32) {
	now := metav1.NewTime(r.clock.Now())
	p.Status = corev1.PodStatus{Phase: phase, Reason: reason, StartTime: &now}
	name := p.Spec.Containers[0].Name
	switch phase {
	case corev1.PodRunning:
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
	case corev1.PodSucceeded, corev1.PodFailed:
		if reason == "" {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, StartedAt: now, FinishedAt: now}}}}
		}
	}
	if err := r.store.Status().Update(context.Background(), p); err != nil {
		r.t.Fatal(err)
	}
}

// scenario plays the kubelet (and users) in step with what the executor has
// recorded, so that a run with a crash sees the same world as one without.
type scenario struct {
	name    string
	retries int32
	kubelet func(r *rig, ta *flytev1.TaskAction, reason string)
}

// recorded says whether the executor has recorded p as its attempt's pod:
// the kubelet moves on only then, as in a run without failures.
func recorded(ta *flytev1.TaskAction, p *corev1.Pod) bool {
	return readState(&ta.Status, max(ta.Status.Attempts, 1)).Pod == p.UID
}

var scenarios = []scenario{
	{name: "success", kubelet: func(r *rig, ta *flytev1.TaskAction, reason string) {
		if p, ok := r.pod("hello-0"); ok {
			switch {
			case reason == flytev1.ReasonQueued && p.Status.Phase == "" && recorded(ta, p):
				r.setPod(p, corev1.PodRunning, "", 0)
			case reason == flytev1.ReasonExecuting && p.Status.Phase == corev1.PodRunning:
				r.setPod(p, corev1.PodSucceeded, "", 0)
			}
		}
	}},
	{name: "retry", retries: 1, kubelet: func(r *rig, ta *flytev1.TaskAction, reason string) {
		if p, ok := r.pod("hello-0"); ok && ta.Status.Attempts == 1 {
			switch {
			case reason == flytev1.ReasonQueued && p.Status.Phase == "" && recorded(ta, p):
				r.setPod(p, corev1.PodRunning, "", 0)
			case reason == flytev1.ReasonExecuting && p.Status.Phase == corev1.PodRunning:
				r.setPod(p, corev1.PodFailed, "", 1)
			}
		}
		if p, ok := r.pod("hello-1"); ok && ta.Status.Attempts == 2 {
			switch {
			case reason == flytev1.ReasonQueued && p.Status.Phase == "" && recorded(ta, p):
				r.setPod(p, corev1.PodRunning, "", 0)
			case reason == flytev1.ReasonExecuting && p.Status.Phase == corev1.PodRunning:
				r.setPod(p, corev1.PodSucceeded, "", 0)
			}
		}
	}},
	{name: "system failure", kubelet: func(r *rig, ta *flytev1.TaskAction, reason string) {
		p, ok := r.pod("hello-0")
		switch {
		case !ok:
		case reason == flytev1.ReasonQueued && p.Status.Phase == "" && recorded(ta, p) && p.UID == "uid-1":
			r.setPod(p, corev1.PodFailed, "Evicted", 0) // the first pod is evicted
		case reason == flytev1.ReasonQueued && p.Status.Phase == "" && recorded(ta, p):
			r.setPod(p, corev1.PodRunning, "", 0)
		case reason == flytev1.ReasonExecuting && p.Status.Phase == corev1.PodRunning:
			r.setPod(p, corev1.PodSucceeded, "", 0)
		}
	}},
	{name: "abort", kubelet: func(r *rig, ta *flytev1.TaskAction, reason string) {
		p, ok := r.pod("hello-0")
		switch {
		case ok && reason == flytev1.ReasonQueued && p.Status.Phase == "" && recorded(ta, p):
			r.setPod(p, corev1.PodRunning, "", 0)
		case reason == flytev1.ReasonExecuting && ta.DeletionTimestamp.IsZero():
			if err := r.store.Delete(context.Background(), ta); err != nil {
				r.t.Fatal(err)
			}
		}
	}},
}

// outcome is what a run ends with: the stored event identities, in order,
// and the TaskAction's status in the terms that matter.
type outcome struct {
	events, status string
	// sysFailures is the ended TaskAction's status.systemFailures.
	sysFailures uint32
	writes      int
	attempted   int
	differ      []string
}

func newRigDiffer(o outcome) string { return strings.Join(o.differ, "; ") }

func (r *rig) run(sc scenario) outcome {
	ctx := context.Background()
	r.createTA(newTA(sc.retries))
	rec := r.reconciler()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "hello"}}
	ended, sys := "deleted", uint32(0)
	for i := 0; i < 200; i++ {
		_, err := rec.Reconcile(ctx, req)
		if errors.Is(err, errCrash) {
			rec = r.reconciler() // restart, which takes a while
			r.clock.Step(3 * time.Second)
			continue
		}
		if err != nil && !errors.Is(err, errRefused) {
			r.t.Fatalf("reconcile: %v", err)
		}
		cur, ok := r.ta()
		if !ok {
			return outcome{events: strings.Join(r.svc.order, " "), status: ended, sysFailures: sys, writes: r.writes, attempted: r.attempted, differ: r.svc.differ}
		}
		reason := ""
		if c := meta.FindStatusCondition(cur.Status.Conditions, flytev1.ConditionProgressing); c != nil {
			reason = c.Reason
		}
		if cur.Status.IsTerminal() && cur.DeletionTimestamp.IsZero() {
			// The whole life: the garbage collector deletes it once it has ended.
			ended, sys = summary(cur), cur.Status.SystemFailures
			if err := r.store.Delete(ctx, cur); err != nil {
				r.t.Fatal(err)
			}
			continue
		}
		sc.kubelet(r, cur, reason)
		r.clock.Step(11 * time.Second)
	}
	r.t.Fatalf("%s did not end; events %v", sc.name, r.svc.order)
	return outcome{}
}

func summary(ta *flytev1.TaskAction) string {
	st := ta.Status
	var conds []string
	for _, c := range st.Conditions {
		conds = append(conds, c.Type+"="+string(c.Status)+"/"+c.Reason+"/"+c.Message)
	}
	es := ""
	if st.ErrorState != nil {
		es = st.ErrorState.Code + "/" + string(st.ErrorState.Kind)
	}
	return fmt.Sprintf("attempts=%d phase=%s v=%d cache=%s history=%s error=%s conds=%s labels=%s pods=%v",
		st.Attempts, st.PluginPhase, st.PluginPhaseVersion, st.CacheStatus, history(st), es, strings.Join(conds, ";"),
		ta.Labels[flytev1.TerminationStatusLabel], len(st.PluginState))
}

// TestCrashAtEveryWrite: for a success, a retry, a system failure and an
// abort, a crash right after each write and a restart end with exactly the
// events (identities) and status of a run without a crash.
func TestCrashAtEveryWrite(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			clean := newRig(t, 0).run(sc)
			if clean.writes < 4 {
				t.Fatalf("a clean run made only %d writes: %+v", clean.writes, clean)
			}
			t.Logf("clean run: %d writes; events %s; %s", clean.writes, clean.events, clean.status)
			for k := 1; k <= clean.writes; k++ {
				got := newRig(t, k).run(sc)
				if got.events != clean.events {
					t.Errorf("crash after write %d: events\n  %s\nwant\n  %s", k, got.events, clean.events)
				}
				if d := newRigDiffer(got); d != "" {
					t.Errorf("crash after write %d: an identity re-sent with other contents: %s", k, d)
				}
				if got.status != clean.status || got.sysFailures != clean.sysFailures {
					t.Errorf("crash after write %d: status\n  %s sys=%d\nwant\n  %s sys=%d", k, got.status, got.sysFailures, clean.status, clean.sysFailures)
				}
			}
		})
	}
}

// TestFailureAtEveryWrite: for the same runs, a write refused once (any
// API write, any report) and retried ends the same as a run without failure,
// but for at most one more system failure counted (a refused pod create is
// one, and the count of an attempt is not reset when its pod then runs).
func TestFailureAtEveryWrite(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			clean := newRig(t, 0).run(sc)
			for k := 1; k <= clean.attempted; k++ {
				r := newRig(t, 0)
				r.failAt = k
				got := r.run(sc)
				if got.events != clean.events || got.status != clean.status || got.sysFailures > clean.sysFailures+1 {
					t.Errorf("write %d refused: events\n  %s\nstatus\n  %s sys=%d\nwant\n  %s\n  %s sys<=%d", k, got.events, got.status, got.sysFailures, clean.events, clean.status, clean.sysFailures+1)
				}
				if d := newRigDiffer(got); d != "" {
					t.Errorf("write %d refused: an identity re-sent with other contents: %s", k, d)
				}
			}
		})
	}
}

// TestEvidenceKeptUntilTheDecisionIsDurable is issue 10, item 6: a permanent
// failure's pod is not deleted while the report of that failure fails.
func TestEvidenceKeptUntilTheDecisionIsDurable(t *testing.T) {
	r := newRig(t, 0)
	ctx := context.Background()
	r.createTA(newTA(0))
	rec := r.reconciler()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "hello"}}
	if _, err := rec.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	p, ok := r.pod("hello-0")
	if !ok {
		t.Fatal("no pod")
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "InvalidImageName"}}}}}
	if err := r.store.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	failing := &failingRecorder{}
	rec.Recorder = failing
	for i := 0; i < 3; i++ {
		if _, err := rec.Reconcile(ctx, req); err == nil {
			t.Fatal("reconcile succeeded while the events service was down")
		}
		if _, ok := r.pod("hello-0"); !ok {
			t.Fatal("the pod was deleted before its failure was reported")
		}
		if cur, _ := r.ta(); cur.Status.IsTerminal() {
			t.Fatal("the failure was persisted before it was reported")
		}
	}
	rec.Recorder = r.svc
	if _, err := rec.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.pod("hello-0"); ok {
		t.Error("the stuck pod was kept after its failure was recorded")
	}
	if cur, _ := r.ta(); !cur.Status.IsTerminal() || cur.Status.ErrorState.Code != "InvalidImageName" {
		t.Errorf("status = %+v", cur.Status)
	}
}

type failingRecorder struct{}

func (failingRecorder) Record(context.Context, events.Event) error {
	return errors.New("events service unavailable")
}

// The status patch carries the statuses' difference alone, and applied to the
// stored object it gives the new status and keeps everything else.
func TestStatusMergePatch(t *testing.T) {
	at := metav1.NewTime(time.Unix(1700000000, 0).UTC())
	old := flytev1.TaskActionStatus{Attempts: 1, PluginPhase: "Running", PluginPhaseVersion: 2,
		Conditions: []metav1.Condition{{Type: flytev1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "Executing", LastTransitionTime: at}}}
	next := *old.DeepCopy()
	next.PluginPhase = ""
	next.PluginPhaseVersion = 0
	next.Conditions = append(next.Conditions, metav1.Condition{Type: flytev1.ConditionSucceeded, Status: metav1.ConditionTrue, Reason: "Completed", LastTransitionTime: at})
	patch, err := statusMergePatch(&old, &next)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]map[string]json.RawMessage
	if err := json.Unmarshal(patch, &top); err != nil || len(top) != 1 || top["status"] == nil {
		t.Fatalf("patch %s: want only a status key (%v)", patch, err)
	}
	if _, ok := top["status"]["attempts"]; ok {
		t.Errorf("patch %s carries the unchanged attempts", patch)
	}
	if string(top["status"]["pluginPhase"]) != "null" {
		t.Errorf("patch %s does not clear pluginPhase", patch)
	}
	ta := &flytev1.TaskAction{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n", Labels: map[string]string{"k": "v"}},
		Spec: flytev1.TaskActionSpec{RunName: "r", ActionName: "a"}, Status: old}
	stored, _ := json.Marshal(ta)
	merged, err := jsonpatch.MergePatch(stored, patch)
	if err != nil {
		t.Fatal(err)
	}
	var got flytev1.TaskAction
	if err := json.Unmarshal(merged, &got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Status, next) || !equality.Semantic.DeepEqual(got.Spec, ta.Spec) || got.Labels["k"] != "v" {
		t.Errorf("patched object: status %+v spec %+v labels %v; want status %+v and the rest unchanged", got.Status, got.Spec, got.Labels, next)
	}
}

// TestCrashResendsAtMostTheHeldEvents is issue 31, item 18: events the
// events service acknowledged while the status that records them was held
// back are remembered in memory only, so a restart sends them again (the same
// identities: the service stores each once). Bound: per restart, at most the
// current attempt's QUEUED and RUNNING (the two statuses that may be held);
// once a status records them, a restart sends nothing again.
func TestCrashResendsAtMostTheHeldEvents(t *testing.T) {
	r := newRig(t, 0)
	r.createTA(newTA(0))
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "hello"}}
	restart := func() *Reconciler {
		rec := r.reconciler()
		rec.memory = newProcessMemory()
		rec.Options.QueuedStatusDelay, rec.Options.SaturatedStatusDelay, rec.Options.ExecutingStatusDelay = 5*time.Second, time.Minute, 10*time.Second
		rec.setQueue(&fakeQueue{waiting: 1}) // saturated: both statuses may be held
		return rec
	}
	reconcile := func(rec *Reconciler) {
		t.Helper()
		if _, err := rec.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	resends := func(rec **Reconciler, want int) {
		t.Helper()
		for i := 0; i < 3; i++ {
			calls, ids := r.svc.calls, len(r.svc.order)
			*rec = restart()
			reconcile(*rec)
			reconcile(*rec)
			if got := r.svc.calls - calls; got != want || len(r.svc.order) != ids {
				t.Fatalf("restart %d: %d events sent (%d new identities), want %d re-sent", i, got, len(r.svc.order)-ids, want)
			}
		}
	}
	rec := restart()
	reconcile(rec) // finalizer, pod: QUEUED acknowledged, Queued held
	pod, ok := r.pod("hello-0")
	if !ok || r.svc.calls != 1 {
		t.Fatalf("launch: pod %v, %d events", ok, r.svc.calls)
	}
	if ta, _ := r.ta(); len(ta.Status.PhaseHistory) != 0 {
		t.Fatal("the Queued status was not held back")
	}
	resends(&rec, 1)
	r.setPod(pod, corev1.PodRunning, "", 0)
	reconcile(rec) // RUNNING acknowledged, Executing held
	if ta, _ := r.ta(); len(ta.Status.PhaseHistory) != 0 || r.svc.calls != 5 {
		t.Fatalf("running: history %v, %d events", ta.Status.PhaseHistory, r.svc.calls)
	}
	resends(&rec, 2)
	r.clock.Step(11 * time.Second)
	reconcile(rec)
	if ta, _ := r.ta(); len(ta.Status.PhaseHistory) != 2 {
		t.Fatalf("past the hold: history %v, want Queued and Executing written", ta.Status.PhaseHistory)
	}
	resends(&rec, 0)
}

func TestMetaPatch(t *testing.T) {
	ta := func(labels map[string]string, fins ...string) *flytev1.TaskAction {
		return &flytev1.TaskAction{ObjectMeta: metav1.ObjectMeta{Labels: labels, Finalizers: fins}}
	}
	for _, tc := range []struct {
		name     string
		old, new *flytev1.TaskAction
		want     string
	}{
		{"nothing", ta(nil, "f"), ta(nil, "f"), ""},
		{"add first finalizer", ta(nil), ta(nil, "f"), `add /metadata/finalizers [f]`},
		{"remove finalizer", ta(nil, "x", "f"), ta(nil, "x"), `test /metadata/finalizers [x f]; add /metadata/finalizers [x]`},
		{"labels onto none", ta(nil), ta(map[string]string{"a/b": "1"}), `add /metadata/labels map[a/b:1]`},
		{"escaped label key", ta(map[string]string{"team": "ml"}), ta(map[string]string{"team": "ml", "flyte.org/x~y": "v"}), `add /metadata/labels/flyte.org~1x~0y v`},
	} {
		var got []string
		for _, op := range metaPatch(tc.old, tc.new) {
			got = append(got, fmt.Sprintf("%s %s %v", op.Op, op.Path, op.Value))
		}
		if g := strings.Join(got, "; "); g != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, g, tc.want)
		}
	}
}
