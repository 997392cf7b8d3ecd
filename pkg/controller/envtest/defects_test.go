package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/controller"
	"github.com/taskaction/executor/pkg/events"
)

// TestForeignPodIsNeverTouched is issue 10, item 5: a pod that holds the
// attempt's name but is not controlled by this TaskAction (a StatefulSet's
// "web-0" beside a TaskAction "web") fails the task with a clear, permanent
// error, and is not deleted when the TaskAction is.
func TestForeignPodIsNeverTouched(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	foreign := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}},
	}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	ta := validTaskAction(ns, "web")
	ta.Spec.Template.Retries = 2
	create(t, ta)
	got := waitReason(t, ns, "web", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	if es := got.Status.ErrorState; es == nil || es.Code != controller.CodeForeignResource || !strings.Contains(es.Message, "web-0") {
		t.Errorf("errorState = %+v", es)
	}
	if got.Status.Attempts != 1 {
		t.Errorf("attempts = %d: a name conflict is not retried", got.Status.Attempts)
	}
	if err := k8s.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "TaskAction gone", func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(got), &flytev1.TaskAction{}))
	})
	p := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(foreign), p); err != nil || p.UID != foreign.UID || p.DeletionTimestamp != nil {
		t.Errorf("the foreign pod was touched: %v, deleting %v", err, p.DeletionTimestamp)
	}
}

// TestQuotaRefusalWaitsWithoutConsumingAttempts is issue 10, item 3: a pod
// create refused by a resource quota waits with backoff (a wake-up, not a
// hang) and consumes no user attempt; once the quota allows, the task runs.
func TestQuotaRefusalWaitsWithoutConsumingAttempts(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	if err := k8s.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	// No quota controller runs here: write the status it would.
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := k8s.Status().Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	ta := validTaskAction(ns, "quota")
	ta.Spec.Template.Retries = 1
	create(t, ta)
	eventually(t, 20*time.Second, "waiting for quota", func() bool {
		c := meta.FindStatusCondition(get(t, ns, "quota").Status.Conditions, flytev1.ConditionProgressing)
		return c != nil && strings.Contains(c.Message, "quota")
	})
	// Several refusals later, still the first attempt and not failed.
	time.Sleep(5 * testRequeue)
	got := get(t, ns, "quota")
	if got.Status.Attempts != 1 || got.Status.IsTerminal() {
		t.Fatalf("after quota refusals: attempts %d, terminal %v", got.Status.Attempts, got.Status.IsTerminal())
	}
	if err := k8s.Delete(ctx, q); err != nil {
		t.Fatal(err)
	}
	pod := waitPod(t, ns, "quota-0")
	waitReason(t, ns, "quota", flytev1.ConditionProgressing, flytev1.ReasonQueued)
	setPodStatus(t, pod, podTerminated(pod, corev1.PodSucceeded, 0, "Completed", ""))
	got = waitReason(t, ns, "quota", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 1 {
		t.Errorf("attempts = %d, want 1", got.Status.Attempts)
	}
}

// TestPodSecurityRefusalEndsTheTask is issue 10, item 3: a refusal that
// would repeat (PodSecurity) ends the task with the API server's words,
// without using its retries.
func TestPodSecurityRefusalEndsTheTask(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	nsObj := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := k8s.Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	ta := validTaskAction(ns, "psa")
	ta.Spec.Template.Retries = 2
	create(t, ta)
	got := waitReason(t, ns, "psa", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	if es := got.Status.ErrorState; es == nil || es.Code != controller.CodeLaunchRefused || !strings.Contains(es.Message, "PodSecurity") {
		t.Errorf("errorState = %+v", es)
	}
	if got.Status.Attempts != 1 {
		t.Errorf("attempts = %d, want 1: the refusal would repeat", got.Status.Attempts)
	}
}

// TestSpecEditAfterLaunch: an edit that makes a running TaskAction's spec
// invalid fails it with InvalidSpec naming the field, and stops its pod
// (before, the finalizer was dropped and the pod left running).
func TestSpecEditAfterLaunch(t *testing.T) {
	ns := namespace(t)
	create(t, validTaskAction(ns, "edited"))
	pod := waitPod(t, ns, "edited-0")
	setPodStatus(t, pod, podRunning(pod))
	ta := waitReason(t, ns, "edited", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	ta.Spec.Template.Container = nil
	if err := k8s.Update(context.Background(), ta); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, ns, "edited", flytev1.ConditionFailed, flytev1.ReasonInvalidSpec)
	if c := meta.FindStatusCondition(got.Status.Conditions, flytev1.ConditionFailed); !strings.Contains(c.Message, "container") {
		t.Errorf("message %q does not name the field", c.Message)
	}
	waitPodGone(t, ns, "edited-0")
	if p := phasesOf(eventsOf(ns, "edited")); !strings.HasSuffix(p, "1:RUNNING 1:FAILED") {
		t.Errorf("events = %s", p)
	}
}

// TestDuplicateIdentityIsRefused is issue 10, item 8, and issue 31, item 7:
// two TaskActions with the same project, domain, run and action (here in two
// namespaces) would have their events taken for one another's; the one that
// started first keeps running (here the first, which has its pod before the
// second exists, whatever the two namespaces' names and even in the same
// creation second), and the other is refused without a pod.
func TestDuplicateIdentityIsRefused(t *testing.T) {
	ns1, ns2 := namespace(t), namespace(t)
	twin := func(ns string) *flytev1.TaskAction {
		ta := validTaskAction(ns, "twin")
		ta.Spec.RunName = ns1 // one identity for both
		return ta
	}
	create(t, twin(ns1))
	waitPod(t, ns1, "twin-0")
	create(t, twin(ns2))
	got := waitReason(t, ns2, "twin", flytev1.ConditionFailed, flytev1.ReasonInvalidSpec)
	if es := got.Status.ErrorState; es == nil || es.Code != controller.CodeDuplicateAction || !strings.Contains(es.Message, ns1+"/twin") {
		t.Errorf("errorState = %+v", es)
	}
	if get(t, ns1, "twin").Status.IsTerminal() {
		t.Error("the twin that started first was stopped")
	}
	if n := len(pods(t, ns2)); n != 0 {
		t.Errorf("the refused twin got %d pods", n)
	}
}

// TestRecreatedTaskActionIsToldApart is issue 10, item 8 (second half): a
// TaskAction deleted and created again under the same name (the same run and
// action identity) reports events of its own: none is dropped as a duplicate
// of the first one's, and the last one (the highest version) is the second
// one's outcome. No sleep: the executor lets the first go only once its
// creation second has passed, so the second is created in a later second.
func TestRecreatedTaskActionIsToldApart(t *testing.T) {
	ns := namespace(t)
	first := create(t, validTaskAction(ns, "again"))
	pod := waitPod(t, ns, "again-0")
	setPodStatus(t, pod, podTerminated(pod, corev1.PodFailed, 1, "Error", "boom"))
	waitReason(t, ns, "again", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	firstEvents := len(eventsOf(ns, "again"))
	if err := k8s.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the first TaskAction to be gone", func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(first), &flytev1.TaskAction{}))
	})
	// Its finished pod goes with it by Kubernetes' garbage collector, which
	// envtest does not run: do its part.
	if err := k8s.Delete(context.Background(), pod); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	waitPodGone(t, ns, "again-0")

	second := create(t, validTaskAction(ns, "again"))
	if second.CreationTimestamp.Unix() == first.CreationTimestamp.Unix() {
		t.Fatalf("both created at %v: the first was let go within its creation second", first.CreationTimestamp)
	}
	pod = waitPod(t, ns, "again-0")
	setPodStatus(t, pod, podTerminated(pod, corev1.PodSucceeded, 0, "Completed", ""))
	waitReason(t, ns, "again", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)

	evs := eventsOf(ns, "again")
	id := func(e events.Event) string { return fmt.Sprintf("%d/%s/%d", e.Attempt, e.Phase, e.Version) }
	firstIDs := map[string]bool{}
	var last events.Event
	for i, e := range evs {
		if i < firstEvents {
			firstIDs[id(e)] = true
		} else if firstIDs[id(e)] {
			t.Errorf("the second TaskAction reported %s, an identity of the first's: %s", id(e), phasesOf(evs))
		}
		if uint32(e.Version) >= uint32(last.Version) {
			last = e
		}
	}
	if len(evs) <= firstEvents || last.Phase != events.PhaseSucceeded {
		t.Errorf("events %s (the first TaskAction's: %d); the highest version is %s, want the second's SUCCEEDED", phasesOf(evs), firstEvents, last.Phase)
	}
}
