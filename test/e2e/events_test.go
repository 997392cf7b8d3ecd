package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/eventsvc"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
	"github.com/taskaction/executor/pkg/task"
)

// eventSequences drives one TaskAction through each scenario and checks the
// events the service stored for it, in order.
func eventSequences(t *testing.T, svc *eventsvctest.Instance) {
	ns := namespace(t)
	startExecutor(t, ns, svc.URL, "http://127.0.0.1:1")
	run := ns

	t.Run("success", func(t *testing.T) {
		create(t, taskAction(ns, run, "ok"))
		pod := waitPod(t, ns, "ok-0")
		waitReason(t, ns, "ok", flytev1.ConditionProgressing, flytev1.ReasonQueued)
		kubelet(t, pod, corev1.PodRunning, 0)
		waitReason(t, ns, "ok", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
		kubelet(t, pod, corev1.PodSucceeded, 0)
		waitReason(t, ns, "ok", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
		evs, seq := stored(t, svc.Store, run, "ok")
		if seq != "1:QUEUED 1:RUNNING 1:SUCCEEDED" {
			t.Errorf("events = %s", seq)
		}
		if last := evs[len(evs)-1]; last.OutputURI != task.OutputURI(testenv.GetTaskAction(t, k8s, ns, "ok"), 1) || last.Cluster != "e2e" || last.UpdatedAt.IsZero() {
			t.Errorf("success event = %+v", last)
		}
	})
	t.Run("retry then success", func(t *testing.T) {
		ta := taskAction(ns, run, "flaky")
		ta.Spec.Template.Retries = 1
		create(t, ta)
		pod := waitPod(t, ns, "flaky-0")
		kubelet(t, pod, corev1.PodFailed, 2)
		pod = waitPod(t, ns, "flaky-1")
		kubelet(t, pod, corev1.PodSucceeded, 0)
		waitReason(t, ns, "flaky", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
		evs, seq := stored(t, svc.Store, run, "flaky")
		// Attempt 1's failure is attempt 2's first QUEUED, with the error.
		if seq != "1:QUEUED 2:QUEUED 2:QUEUED 2:SUCCEEDED" {
			t.Errorf("events = %s", seq)
		}
		if e := evs[1].Error; e == nil || e.Code != "Error" || e.Kind != "USER" {
			t.Errorf("failed attempt's error = %+v (the code must be sent)", e)
		}
	})
	t.Run("permanent failure", func(t *testing.T) {
		create(t, taskAction(ns, run, "broken"))
		pod := waitPod(t, ns, "broken-0")
		kubelet(t, pod, corev1.PodFailed, 7)
		waitReason(t, ns, "broken", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
		evs, seq := stored(t, svc.Store, run, "broken")
		if seq != "1:QUEUED 1:FAILED" {
			t.Errorf("events = %s", seq)
		}
		if e := evs[1].Error; e == nil || e.Code != "Error" {
			t.Errorf("error = %+v", e)
		}
	})
	t.Run("invalid spec", func(t *testing.T) {
		ta := taskAction(ns, run, "invalid")
		ta.Spec.InputURI = ""
		create(t, ta)
		waitReason(t, ns, "invalid", flytev1.ConditionFailed, flytev1.ReasonInvalidSpec)
		evs, seq := stored(t, svc.Store, run, "invalid")
		if seq != "1:FAILED" || evs[0].Error == nil || evs[0].Error.Code != "InvalidSpec" {
			t.Errorf("events = %s %+v", seq, evs)
		}
	})
	t.Run("abort", func(t *testing.T) {
		ta := taskAction(ns, run, "doomed")
		create(t, ta)
		pod := waitPod(t, ns, "doomed-0")
		kubelet(t, pod, corev1.PodRunning, 0)
		waitReason(t, ns, "doomed", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
		if err := k8s.Delete(context.Background(), ta); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "TaskAction gone", func() bool {
			return k8s.Get(context.Background(), client.ObjectKeyFromObject(ta), &flytev1.TaskAction{}) != nil
		})
		if _, seq := stored(t, svc.Store, run, "doomed"); seq != "1:QUEUED 1:RUNNING 1:ABORTED" {
			t.Errorf("events = %s", seq)
		}
	})
	if stored, dups := svc.Store.Counts(); dups != 0 {
		t.Logf("%d events stored, %d re-sent duplicates dropped by the service", stored, dups)
	}
}

func TestEventSequencesSQLite(t *testing.T) {
	eventSequences(t, eventsvctest.Start(t, eventsvctest.Options{}))
}

func TestEventSequencesPostgres(t *testing.T) {
	dsn := eventsvctest.StartPostgres(t)
	st, err := eventsvc.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	eventSequences(t, eventsvctest.Start(t, eventsvctest.Options{Store: st}))
}

// TestEventsOutage stops the events service while a TaskAction progresses: its
// status must not advance past what the service has stored, and once the
// service is back every transition the status records is there exactly once.
func TestEventsOutage(t *testing.T) {
	svc := eventsvctest.Start(t, eventsvctest.Options{})
	ns := namespace(t)
	startExecutor(t, ns, svc.URL, "http://127.0.0.1:1")
	run := ns
	create(t, taskAction(ns, run, "outage"))
	pod := waitPod(t, ns, "outage-0")
	waitReason(t, ns, "outage", flytev1.ConditionProgressing, flytev1.ReasonQueued)

	svc.Stop()
	kubelet(t, pod, corev1.PodRunning, 0)
	time.Sleep(2 * time.Second)
	if ta := get(t, ns, "outage"); len(ta.Status.PhaseHistory) != 1 {
		t.Fatalf("status advanced to %v while the events service was down", ta.Status.PhaseHistory)
	}
	kubelet(t, pod, corev1.PodSucceeded, 0)
	time.Sleep(time.Second)
	if ta := get(t, ns, "outage"); len(ta.Status.PhaseHistory) != 1 || flytev1IsTerminal(ta) {
		t.Fatalf("status advanced to %v while the events service was down", ta.Status.PhaseHistory)
	}

	svc.Resume()
	ta := waitReason(t, ns, "outage", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	evs, seq := stored(t, svc.Store, run, "outage")
	// Every transition in the status has exactly one stored event, in order.
	var want []string
	for _, h := range ta.Status.PhaseHistory {
		want = append(want, map[string]string{"Queued": "1:QUEUED", "Executing": "1:RUNNING", "Completed": "1:SUCCEEDED"}[h.Phase])
	}
	if seq != strings.Join(want, " ") {
		t.Errorf("stored events %q, status history %v", seq, ta.Status.PhaseHistory)
	}
	ids := map[string]bool{}
	for _, e := range evs {
		id := string(e.Phase) + "/" + string(rune('0'+e.Version))
		if ids[id] {
			t.Errorf("event %s stored twice", id)
		}
		ids[id] = true
	}
}

func flytev1IsTerminal(ta *flytev1.TaskAction) bool {
	for _, c := range ta.Status.Conditions {
		if (c.Type == flytev1.ConditionSucceeded || c.Type == flytev1.ConditionFailed) && c.Status == "True" {
			return true
		}
	}
	return false
}
