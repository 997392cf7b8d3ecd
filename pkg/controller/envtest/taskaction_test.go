package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/controller"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

func TestHappyPath(t *testing.T) {
	ns := namespace(t)
	ta := create(t, validTaskAction(ns, "happy"))

	pod := waitPod(t, ns, "happy-0")
	got := waitReason(t, ns, ta.Name, flytev1.ConditionProgressing, flytev1.ReasonQueued)
	if !containsString(got.Finalizers, flytev1.Finalizer) {
		t.Errorf("finalizer missing: %v", got.Finalizers)
	}
	if got.Status.Attempts != 1 || len(got.Status.PhaseHistory) != 1 || got.Status.PluginStateVersion != 2 {
		t.Errorf("status after launch: attempts=%d history=%v pluginState=%s", got.Status.Attempts, got.Status.PhaseHistory, got.Status.PluginState)
	}
	// The pod is ours, labelled, and runs what the template says.
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != ta.UID || ref.Kind != "TaskAction" {
		t.Errorf("pod controller reference = %+v", ref)
	}
	for k, v := range map[string]string{
		"flyte.org/managed": "true", "flyte.org/project": "proj", "flyte.org/domain": "dev",
		"flyte.org/run": ns, "flyte.org/action": "happy", "attempt": "1", "team": "ml",
	} {
		if pod.Labels[k] != v {
			t.Errorf("pod label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %q", pod.Spec.RestartPolicy)
	}
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	if want := "--inputs s3://bucket/run1/happy/inputs.pb --outputs " + task.OutputPrefix(ta, 1); args != want {
		t.Errorf("args = %q, want %q", args, want)
	}

	setPodStatus(t, pod, podRunning(pod))
	waitReason(t, ns, ta.Name, flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setPodStatus(t, pod, podTerminated(pod, corev1.PodSucceeded, 0, "Completed", ""))
	got = waitReason(t, ns, ta.Name, flytev1.ConditionSucceeded, flytev1.ReasonCompleted)

	if c := meta.FindStatusCondition(got.Status.Conditions, flytev1.ConditionProgressing); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Progressing after success = %+v", c)
	}
	if _, ok := got.Status.CompletedAt(); !ok {
		t.Error("no completion time")
	}
	var phases []string
	for _, h := range got.Status.PhaseHistory {
		phases = append(phases, h.Phase)
	}
	if strings.Join(phases, ",") != "Queued,Executing,Completed" {
		t.Errorf("phaseHistory = %v", phases)
	}
	// The finalizer stays until the TaskAction is deleted, and no label is
	// written: an ended TaskAction costs no metadata write.
	got = get(t, ns, ta.Name)
	if len(got.Finalizers) != 1 || got.Labels[flytev1.TerminationStatusLabel] != "" {
		t.Errorf("finalizers %v, labels %v after the end", got.Finalizers, got.Labels)
	}
	evs := eventsOf(ns, "happy")
	if p := phasesOf(evs); p != "1:QUEUED 1:RUNNING 1:SUCCEEDED" {
		t.Errorf("events = %s", p)
	}
	last := evs[len(evs)-1]
	if last.OutputURI != task.OutputURI(ta, 1) || last.Cluster != "test-cluster" || last.PodName != "happy-0" {
		t.Errorf("success event = %+v", last)
	}
	if len(pods(t, ns)) != 1 {
		t.Errorf("pods = %d, want 1", len(pods(t, ns)))
	}
}

func TestInvalidSpec(t *testing.T) {
	ns := namespace(t)
	ta := validTaskAction(ns, "invalid")
	ta.Spec.InputURI, ta.Spec.RunOutputBase, ta.Spec.TaskType = "", "", ""
	create(t, ta)
	got := waitReason(t, ns, "invalid", flytev1.ConditionFailed, flytev1.ReasonInvalidSpec)
	c := meta.FindStatusCondition(got.Status.Conditions, flytev1.ConditionFailed)
	for _, f := range []string{"taskType", "inputUri", "runOutputBase"} {
		if !strings.Contains(c.Message, f) {
			t.Errorf("message %q does not name %s", c.Message, f)
		}
	}
	if p := meta.FindStatusCondition(got.Status.Conditions, flytev1.ConditionProgressing); p == nil || p.Status != metav1.ConditionFalse || p.Reason != flytev1.ReasonInvalidSpec {
		t.Errorf("Progressing = %+v", p)
	}
	if containsString(got.Finalizers, flytev1.Finalizer) {
		t.Error("finalizer added to an invalid TaskAction")
	}
	if got.Status.ErrorState == nil || got.Status.ErrorState.Code != "InvalidSpec" {
		t.Errorf("errorState = %+v", got.Status.ErrorState)
	}
	evs := eventsOf(ns, "invalid")
	if len(evs) != 1 || evs[0].Phase != events.PhaseFailed || evs[0].Error == nil || evs[0].Error.Code != "InvalidSpec" {
		t.Errorf("events = %+v", evs)
	}
	eventually(t, 10*time.Second, "Warning event FailedValidation", func() bool {
		l := &eventsv1.EventList{}
		_ = k8s.List(context.Background(), l, client.InNamespace(ns))
		for _, e := range l.Items {
			if e.Reason == controller.EventFailedValidation && e.Type == corev1.EventTypeWarning && e.Regarding.Name == "invalid" {
				return true
			}
		}
		return false
	})
	if n := len(pods(t, ns)); n != 0 {
		t.Errorf("an invalid TaskAction got %d pods", n)
	}
}

func TestUserRetriesToExhaustion(t *testing.T) {
	ns := namespace(t)
	ta := validTaskAction(ns, "retry")
	ta.Spec.Template.Retries = 2
	create(t, ta)

	for attempt := 1; attempt <= 3; attempt++ {
		name := "retry-" + string(rune('0'+attempt-1))
		pod := waitPod(t, ns, name)
		if pod.Labels["attempt"] != string(rune('0'+attempt)) {
			t.Errorf("pod %s attempt label = %q", name, pod.Labels["attempt"])
		}
		setPodStatus(t, pod, podRunning(pod))
		setPodStatus(t, pod, podTerminated(pod, corev1.PodFailed, 3, "Error", "boom"))
		if attempt < 3 {
			waitPodGone(t, ns, name)
		}
	}
	got := waitReason(t, ns, "retry", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	if got.Status.Attempts != 3 {
		t.Errorf("attempts = %d, want 3", got.Status.Attempts)
	}
	if es := got.Status.ErrorState; es == nil || es.Kind != flytev1.ErrorKindUser || es.Code != "Error" || !strings.Contains(es.Message, "boom") {
		t.Errorf("errorState = %+v", es)
	}
	evs := eventsOf(ns, "retry")
	p := phasesOf(evs)
	// A retried attempt's failure is the next attempt's first QUEUED, with
	// the error (no FAILED before the last attempt's, as Flyte expects).
	if strings.Count(p, "FAILED") != 1 || !strings.HasSuffix(p, "3:FAILED") {
		t.Errorf("events %q: want FAILED only for the last attempt", p)
	}
	for _, next := range []int32{2, 3} {
		found := false
		for _, e := range evs {
			found = found || (e.Attempt == next && e.Phase == events.PhaseQueued && e.Error != nil && e.Error.Code == "Error")
		}
		if !found {
			t.Errorf("events %q: attempt %d's QUEUED does not carry attempt %d's error", p, next, next-1)
		}
	}
}

func TestRetryThenSuccess(t *testing.T) {
	ns := namespace(t)
	ta := validTaskAction(ns, "flaky")
	ta.Spec.Template.Retries = 1
	ta.Spec.Template.Container.Args = []string{"--prev", "{{.prevCheckpointPrefix}}"}
	create(t, ta)
	pod := waitPod(t, ns, "flaky-0")
	if a := pod.Spec.Containers[0].Args; len(a) != 2 || a[1] != `""` {
		t.Errorf("attempt 1 prevCheckpointPrefix = %q, want the two characters \"\"", a)
	}
	setPodStatus(t, pod, podTerminated(pod, corev1.PodFailed, 1, "", ""))
	pod = waitPod(t, ns, "flaky-1")
	if a := pod.Spec.Containers[0].Args; len(a) != 2 || !strings.Contains(a[1], "/flaky/1") {
		t.Errorf("attempt 2 prevCheckpointPrefix = %q, want attempt 1's checkpoint prefix", a)
	}
	setPodStatus(t, pod, podTerminated(pod, corev1.PodSucceeded, 0, "Completed", ""))
	got := waitReason(t, ns, "flaky", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 2 {
		t.Errorf("attempts = %d", got.Status.Attempts)
	}
	evs := eventsOf(ns, "flaky")
	if p := phasesOf(evs); p != "1:QUEUED 2:QUEUED 2:QUEUED 2:SUCCEEDED" {
		t.Errorf("events = %s", p)
	}
	if evs[1].Error == nil || evs[1].Error.Code != "ExitCode1" {
		t.Errorf("failed attempt's event error = %+v", evs[1].Error)
	}
}

func TestFailureClasses(t *testing.T) {
	cases := []struct {
		name    string
		drive   func(t *testing.T, pod *corev1.Pod)
		reason  string
		code    string
		kind    flytev1.ErrorKind
		podGone bool // the stuck pod is aborted
	}{
		{"oom", func(t *testing.T, p *corev1.Pod) {
			setPodStatus(t, p, podTerminated(p, corev1.PodFailed, 137, "OOMKilled", ""))
		}, flytev1.ReasonPermanentFailure, "OOMKilled", flytev1.ErrorKindUser, false},
		{"oom-succeeded", func(t *testing.T, p *corev1.Pod) {
			setPodStatus(t, p, podTerminated(p, corev1.PodSucceeded, 0, "OOMKilled", ""))
		}, flytev1.ReasonPermanentFailure, "OOMKilled", flytev1.ErrorKindUser, false},
		{"badimage", func(t *testing.T, p *corev1.Pod) {
			setPodStatus(t, p, podWaiting(p, "InvalidImageName", "bad name"))
		}, flytev1.ReasonPermanentFailure, "InvalidImageName", flytev1.ErrorKindUser, true},
		{"config-error", func(t *testing.T, p *corev1.Pod) {
			setPodStatus(t, p, podWaiting(p, "CreateContainerConfigError", "secret missing"))
		}, flytev1.ReasonPermanentFailure, "CreateContainerConfigError", flytev1.ErrorKindUser, true},
		{"pullbackoff", func(t *testing.T, p *corev1.Pod) {
			// Fails only once the (1s) grace period has passed.
			setPodStatus(t, p, podWaiting(p, "ImagePullBackOff", "back-off pulling image"))
		}, flytev1.ReasonPermanentFailure, "ImagePullBackOff", flytev1.ErrorKindUser, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t)
			create(t, validTaskAction(ns, "fc-"+tc.name))
			pod := waitPod(t, ns, "fc-"+tc.name+"-0")
			start := time.Now()
			tc.drive(t, pod)
			got := waitReason(t, ns, "fc-"+tc.name, flytev1.ConditionFailed, tc.reason)
			if es := got.Status.ErrorState; es == nil || es.Code != tc.code || es.Kind != tc.kind {
				t.Errorf("errorState = %+v, want code %s kind %s", es, tc.code, tc.kind)
			}
			if tc.name == "pullbackoff" && time.Since(start) < time.Second {
				t.Errorf("failed after %v, before the grace period", time.Since(start))
			}
			if tc.podGone {
				waitPodGone(t, ns, pod.Name)
			}
		})
	}
}

func TestSystemFailureCeilingPodDeletedAgainAndAgain(t *testing.T) {
	ns := namespace(t)
	create(t, validTaskAction(ns, "deleted"))
	for i := 1; i <= 4; i++ {
		pod := waitPod(t, ns, "deleted-0")
		// Someone else deletes the pod; the executor relaunches the same attempt after a backoff.
		if err := k8s.Delete(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			eventually(t, 10*time.Second, "system failure counted", func() bool {
				return get(t, ns, "deleted").Status.SystemFailures == uint32(i)
			})
		}
	}
	got := waitReason(t, ns, "deleted", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	es := got.Status.ErrorState
	if es == nil || es.Code != controller.CodeMaxSystemFailuresExceeded || es.Kind != flytev1.ErrorKindSystem || !strings.Contains(es.Message, "ResourceDeletedExternally") {
		t.Errorf("errorState = %+v", es)
	}
	if got.Status.Attempts != 1 {
		t.Errorf("system failures used user attempts: attempts = %d", got.Status.Attempts)
	}
}

// TestEvictionRelaunchesAndKeepsCounting: an evicted pod is a system failure,
// relaunched under the same attempt; its count stays while the relaunched
// pod runs (a try that runs and is evicted again must reach the ceiling).
func TestEvictionRelaunchesAndKeepsCounting(t *testing.T) {
	ns := namespace(t)
	create(t, validTaskAction(ns, "evicted"))
	pod := waitPod(t, ns, "evicted-0")
	setPodStatus(t, pod, func(s *corev1.PodStatus) {
		s.Phase, s.Reason, s.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	})
	eventually(t, 10*time.Second, "system failure counted", func() bool {
		return get(t, ns, "evicted").Status.SystemFailures == 1
	})
	// Relaunched under the same attempt once the old pod is gone.
	eventually(t, 10*time.Second, "relaunched pod", func() bool {
		p := &corev1.Pod{}
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "evicted-0"}, p) == nil && p.UID != pod.UID
	})
	pod = waitPod(t, ns, "evicted-0")
	setPodStatus(t, pod, podRunning(pod))
	got := waitReason(t, ns, "evicted", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	if got.Status.SystemFailures != 1 {
		t.Errorf("systemFailures after the relaunched pod ran = %d, want 1", got.Status.SystemFailures)
	}
	setPodStatus(t, pod, podTerminated(pod, corev1.PodSucceeded, 0, "Completed", ""))
	waitReason(t, ns, "evicted", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	p := phasesOf(eventsOf(ns, "evicted"))
	if !strings.HasPrefix(p, "1:QUEUED 1:QUEUED") || !strings.HasSuffix(p, "1:RUNNING 1:SUCCEEDED") {
		t.Errorf("events = %s", p)
	}
	// Versions keep a re-queued attempt's events distinct.
	seen := map[string]bool{}
	for _, e := range eventsOf(ns, "evicted") {
		k := fmt.Sprintf("%s/%d", e.Phase, e.Version)
		if seen[k] {
			t.Errorf("duplicate event identity %s", k)
		}
		seen[k] = true
	}
}

func TestTimeout(t *testing.T) {
	ns := namespace(t)
	ta := validTaskAction(ns, "slow")
	ta.Spec.Template.Timeout = ptr("2s")
	create(t, ta)
	pod := waitPod(t, ns, "slow-0")
	setPodStatus(t, pod, podRunning(pod))
	got := waitReason(t, ns, "slow", flytev1.ConditionFailed, flytev1.ReasonTimedOut)
	if es := got.Status.ErrorState; es == nil || es.Code != "Timeout" {
		t.Errorf("errorState = %+v", es)
	}
	completedAt, _ := got.Status.CompletedAt()
	if d := completedAt.Sub(pod.CreationTimestamp.Time); d < 2*time.Second {
		t.Errorf("timed out after %v, before the 2s timeout", d)
	}
	waitPodGone(t, ns, "slow-0")
	if p := phasesOf(eventsOf(ns, "slow")); !strings.HasSuffix(p, "1:TIMED_OUT") {
		t.Errorf("events = %s", p)
	}
}

func TestDeleteMidRun(t *testing.T) {
	ns := namespace(t)
	ta := create(t, validTaskAction(ns, "abort"))
	pod := waitPod(t, ns, "abort-0")
	setPodStatus(t, pod, podRunning(pod))
	waitReason(t, ns, "abort", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	if err := k8s.Delete(context.Background(), ta); err != nil {
		t.Fatal(err)
	}
	waitPodGone(t, ns, "abort-0")
	eventually(t, 10*time.Second, "TaskAction gone", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(ta), &flytev1.TaskAction{})
		return err != nil
	})
	if p := phasesOf(eventsOf(ns, "abort")); p != "1:QUEUED 1:RUNNING 1:ABORTED" {
		t.Errorf("events = %s", p)
	}
}

func TestDeleteTerminalSendsNoAbort(t *testing.T) {
	ns := namespace(t)
	ta := create(t, validTaskAction(ns, "done"))
	pod := waitPod(t, ns, "done-0")
	setPodStatus(t, pod, podTerminated(pod, corev1.PodSucceeded, 0, "Completed", ""))
	waitReason(t, ns, "done", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if err := k8s.Delete(context.Background(), ta); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "TaskAction gone", func() bool {
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(ta), &flytev1.TaskAction{}) != nil
	})
	time.Sleep(300 * time.Millisecond)
	if p := phasesOf(eventsOf(ns, "done")); strings.Contains(p, "ABORTED") {
		t.Errorf("events = %s: an ABORTED event for a finished TaskAction", p)
	}
}

func TestServiceAccountAndTemplating(t *testing.T) {
	ns := namespace(t)
	ta := validTaskAction(ns, "sa")
	ta.Spec.Template.SecurityContext = &flytev1.SecurityContext{RunAs: &flytev1.RunAs{K8sServiceAccount: "runner"}}
	ta.Spec.Template.Container.Args = []string{"{{ .Input }}", "{{.INPUTPREFIX}}", "{{.namespace}}", "{{.checkpointOutputPrefix}}"}
	ta.Spec.EnvVars = map[string]string{"FOO": "bar", "ACTION_NAME": "spoofed"}
	create(t, ta)
	pod := waitPod(t, ns, "sa-0")
	if pod.Spec.ServiceAccountName != "runner" {
		t.Errorf("serviceAccountName = %q", pod.Spec.ServiceAccountName)
	}
	a := pod.Spec.Containers[0].Args
	if a[0] != "s3://bucket/run1/sa/inputs.pb" || a[1] != "s3://bucket/run1/sa" || a[2] != ns || a[3] != task.CheckpointPrefix(ta, 1) {
		t.Errorf("rendered args = %q", a)
	}
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["ACTION_NAME"] != "sa" || env["RUN_NAME"] != ns || env["FOO"] != "bar" {
		t.Errorf("env = %v", env)
	}

	// An unknown placeholder is left as it is (a go-template in a kubectl command).
	other := validTaskAction(ns, "gotmpl")
	other.Spec.Template.Container.Args = []string{"{{.metadata.name}}"}
	create(t, other)
	if a := waitPod(t, ns, "gotmpl-0").Spec.Containers[0].Args; len(a) != 1 || a[0] != "{{.metadata.name}}" {
		t.Errorf("args = %q, want the go-template untouched", a)
	}
}

func TestInvalidPodIsPermanent(t *testing.T) {
	ns := namespace(t)
	ta := validTaskAction(ns, "badpod")
	spec, err := flytev1.PodSpecDocumentOf(&corev1.PodSpec{
		Containers:    []corev1.Container{},
		RestartPolicy: "Sometimes",
	})
	if err != nil {
		t.Fatal(err)
	}
	ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Spec: spec}
	create(t, ta)
	got := waitReason(t, ns, "badpod", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	if es := got.Status.ErrorState; es == nil || es.Code != "InvalidResource" {
		t.Errorf("errorState = %+v", es)
	}
}

func TestRestartMidRunReusesPod(t *testing.T) {
	ns := namespace(t)
	create(t, validTaskAction(ns, "restart"))
	pod := waitPod(t, ns, "restart-0")
	waitReason(t, ns, "restart", flytev1.ConditionProgressing, flytev1.ReasonQueued)

	stopManager()
	setPodStatus(t, pod, podRunning(pod))
	if err := startManager(testConfig()); err != nil {
		t.Fatal(err)
	}
	got := waitReason(t, ns, "restart", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setPodStatus(t, pod, podTerminated(pod, corev1.PodSucceeded, 0, "Completed", ""))
	got = waitReason(t, ns, "restart", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	ps := pods(t, ns)
	if len(ps) != 1 || ps[0].UID != pod.UID {
		t.Errorf("pods after restart = %d (want the original one only)", len(ps))
	}
	if got.Status.Attempts != 1 || len(got.Status.PhaseHistory) != 3 {
		t.Errorf("status after restart: attempts=%d history=%v", got.Status.Attempts, got.Status.PhaseHistory)
	}
	if p := phasesOf(eventsOf(ns, "restart")); p != "1:QUEUED 1:RUNNING 1:SUCCEEDED" {
		t.Errorf("events = %s", p)
	}
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestPluginNotFound runs the reconciler with an empty registry (the built-in
// one always has a default plugin), against the API server, while the suite's
// manager is stopped.
func TestPluginNotFound(t *testing.T) {
	ns := namespace(t)
	stopManager()
	defer func() {
		if err := startManager(testConfig()); err != nil {
			t.Fatal(err)
		}
	}()
	create(t, validTaskAction(ns, "noplugin"))
	r := &controller.Reconciler{Client: k8s, APIReader: k8s, Registry: plugin.NewRegistry(), Recorder: recorder, Clock: clock.RealClock{},
		Options: controller.Options{MaxSystemFailures: 3, RequeueDuration: testRequeue}}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "noplugin"}})
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("Reconcile = %+v, %v; want no error and no requeue", res, err)
	}
	got := get(t, ns, "noplugin")
	c := meta.FindStatusCondition(got.Status.Conditions, flytev1.ConditionFailed)
	if c == nil || c.Reason != flytev1.ReasonPluginNotFound || !strings.Contains(c.Message, "python-task") {
		t.Errorf("Failed condition = %+v", c)
	}
	if containsString(got.Finalizers, flytev1.Finalizer) || len(pods(t, ns)) != 0 {
		t.Error("a TaskAction without a plugin got a finalizer or a pod")
	}
}
