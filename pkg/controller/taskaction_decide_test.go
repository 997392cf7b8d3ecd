package controller

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/storage"
	"github.com/taskaction/executor/pkg/task"
)

// launchedTA is ta after its attempt's pod "pod-1" was launched at t0+1s and
// recorded (QUEUED reported).
func launchedTA(t testing.TB, ta *flytev1.TaskAction) *flytev1.TaskAction {
	t.Helper()
	w := worldOf(t, ta, ours("pod-1", t0.Add(time.Second), plugin.Observation{Phase: plugin.PhaseQueued}))
	w.Launch = &launchOutcome{}
	p := testDecider.decide(w, t0.Add(time.Second))
	if evs(p.Events) != "1:QUEUED:v1" {
		t.Fatalf("launch: events %s", evs(p.Events))
	}
	return applied(ta, p)
}

// runningTA is launchedTA after RUNNING was recorded.
func runningTA(t testing.TB, ta *flytev1.TaskAction) *flytev1.TaskAction {
	t.Helper()
	ta = launchedTA(t, ta)
	p := testDecider.decide(worldOf(t, ta, ours("pod-1", t0.Add(time.Second), running(t0.Add(2*time.Second)))), t0.Add(2*time.Second))
	return applied(ta, p)
}

type want struct {
	events      string
	history     string
	reason      string // Progressing reason, or the terminal condition's
	code        string // errorState.code
	attempts    uint32
	sysFailures uint32
	launch      bool
	deletes     string // UIDs, comma separated
	finish      bool
	removeFin   bool
	release     bool
	wake        time.Duration // -1: any positive
	noWrite     bool          // the status must not change
}

func TestDecide(t *testing.T) {
	now := t0.Add(time.Minute)
	deleting := metav1.NewTime(now)
	cases := []struct {
		name string
		ta   func(t testing.TB) *flytev1.TaskAction
		pod  resource
		mod  func(*World)
		now  time.Time
		want want
	}{
		{name: "new: finalizer then launch", ta: func(testing.TB) *flytev1.TaskAction {
			ta := newTA(0)
			ta.Finalizers = nil
			return ta
		}, want: want{launch: true, noWrite: true}},
		{name: "launched this reconcile: QUEUED, pod recorded", ta: func(testing.TB) *flytev1.TaskAction { return newTA(0) },
			pod: ours("pod-1", now, plugin.Observation{Phase: plugin.PhaseQueued}), mod: func(w *World) { w.Launch = &launchOutcome{} },
			want: want{events: "1:QUEUED:v1", history: "Queued", reason: "Queued", attempts: 1, wake: 5 * time.Minute}},
		{name: "running", ta: launched0, pod: ours("pod-1", t0, running(now)),
			want: want{events: "1:RUNNING:v20", history: "Queued,Executing", reason: "Executing", attempts: 1, wake: 5 * time.Minute}},
		{name: "running, nothing new", ta: running0, pod: ours("pod-1", t0, running(t0.Add(2*time.Second))),
			want: want{noWrite: true, wake: 5 * time.Minute}},
		{name: "succeeded: pod kept for its logs", ta: running0, pod: ours("pod-1", t0, succeeded(now)),
			want: want{events: "1:SUCCEEDED:v37", history: "Queued,Executing,Completed", reason: "Completed", attempts: 1, finish: true}},
		{name: "user failure with retries left: no FAILED, the next attempt's QUEUED carries the error, pod deleted", ta: func(t testing.TB) *flytev1.TaskAction { return runningTA(t, newTA(1)) },
			pod:  ours("pod-1", t0, userFailure(now)),
			want: want{events: "2:QUEUED:v1", history: "Queued,Executing,RetryableFailure", reason: "RetryableFailure", code: "Error", attempts: 2, deletes: "pod-1", wake: wakeNow}},
		{name: "user failure, no retries left", ta: running0, pod: ours("pod-1", t0, userFailure(now)),
			want: want{events: "1:FAILED:v38", history: "Queued,Executing,PermanentFailure", reason: "PermanentFailure", code: "Error", attempts: 1, finish: true}},
		{name: "stuck pod (InvalidImageName): failed, then deleted", ta: launched0, pod: ours("pod-1", t0, podWaiting("InvalidImageName")),
			want: want{events: "1:FAILED:v22", history: "Queued,PermanentFailure", reason: "PermanentFailure", code: "InvalidImageName", attempts: 1, deletes: "pod-1", finish: true}},
		{name: "evicted: system failure, pod discarded then deleted, backoff", ta: running0, pod: ours("pod-1", t0, evicted(now)),
			want: want{history: "Queued,Executing", reason: "Executing", code: "Evicted", attempts: 1, sysFailures: 1, deletes: "pod-1", wake: 10 * time.Second}},
		{name: "recorded pod gone: deleted externally", ta: running0,
			want: want{history: "Queued,Executing", reason: "Executing", code: CodeResourceDeletedExternally, attempts: 1, sysFailures: 1, wake: 10 * time.Second}},
		{name: "system failure ceiling", ta: func(t testing.TB) *flytev1.TaskAction {
			ta := runningTA(t, newTA(0))
			ta.Status.SystemFailures = 3
			return ta
		}, pod: ours("pod-1", t0, evicted(now)),
			want: want{events: "1:FAILED:v38", history: "Queued,Executing,PermanentFailure", reason: "PermanentFailure", code: CodeMaxSystemFailuresExceeded, attempts: 1, sysFailures: 4, finish: true}},
		{name: "foreign pod holds the name: fails, never deleted", ta: func(testing.TB) *flytev1.TaskAction { return newTA(0) },
			pod:  resource{Holder: holderForeign, UID: "sts-pod"},
			want: want{events: "1:FAILED:v6", history: "PermanentFailure", reason: "PermanentFailure", code: CodeForeignResource, attempts: 1, finish: true}},
		{name: "pod of an earlier TaskAction of the same name: wait", ta: func(testing.TB) *flytev1.TaskAction { return newTA(0) },
			pod:  resource{Holder: holderPreviousTaskAction, UID: "old"},
			want: want{events: "1:QUEUED:v1", history: "Queued", reason: "Queued", attempts: 1, wake: 10 * time.Second}},
		{name: "quota refusal: waits with backoff, no attempt consumed", ta: func(testing.TB) *flytev1.TaskAction { return newTA(0) },
			mod: func(w *World) {
				w.Launch = &launchOutcome{Err: &plugin.LaunchError{Retryable: true, Err: plugin.ExecError{Code: plugin.CodeQuotaExceeded, Message: "exceeded quota: q"}}}
			},
			want: want{events: "1:WAITING_FOR_RESOURCES:v2", history: "Queued", reason: "Queued", attempts: 1, wake: 10 * time.Second}},
		{name: "PodSecurity refusal: ends with a clear error", ta: func(testing.TB) *flytev1.TaskAction { return newTA(2) },
			mod: func(w *World) {
				w.Launch = &launchOutcome{Err: &plugin.LaunchError{Retryable: true, Err: plugin.ExecError{Code: plugin.CodeForbidden,
					Message: `pods "hello-0" is forbidden: violates PodSecurity "restricted:latest"`}}}
			},
			want: want{events: "1:FAILED:v6", history: "PermanentFailure", reason: "PermanentFailure", code: CodeLaunchRefused, attempts: 1, finish: true}},
		{name: "API error on launch: system failure", ta: func(testing.TB) *flytev1.TaskAction { return newTA(0) },
			mod:  func(w *World) { w.Launch = &launchOutcome{Err: errors.New("connection refused")} },
			want: want{code: CodeSystemError, sysFailures: 1, wake: 10 * time.Second}},
		{name: "name still held by a terminating pod: wait", ta: func(testing.TB) *flytev1.TaskAction { return newTA(0) },
			mod:  func(w *World) { w.Launch = &launchOutcome{Err: plugin.ErrResourceTerminating} },
			want: want{events: "1:QUEUED:v1", history: "Queued", reason: "Queued", attempts: 1, wake: 10 * time.Second}},
		{name: "backoff not over: no launch", ta: func(t testing.TB) *flytev1.TaskAction {
			ta := newTA(0)
			at := metav1.NewTime(t0.Add(2 * time.Minute))
			writeState(&ta.Status, attemptState{Attempt: 1, RetryAt: &at})
			return ta
		}, want: want{noWrite: true, wake: time.Minute}},
		{name: "cache hit: succeeds without a pod", ta: cached, mod: func(w *World) {
			w.Cache = cacheAnswer{Asked: true, Hit: &cache.Entry{OutputURI: "s3://b/old/outputs.pb"}}
		}, want: want{events: "1:SUCCEEDED:v5", history: "Completed", reason: "Completed", attempts: 1, finish: true}},
		{name: "cache reservation held by another: wait", ta: cached, mod: func(w *World) {
			w.Task.Cache.Serializable = true
			w.Cache = cacheAnswer{Asked: true, HeldBy: "ns/other"}
		}, want: want{events: "1:WAITING_FOR_RESOURCES:v2", history: "Queued", reason: "Queued", attempts: 1, wake: 10 * time.Second}},
		{name: "cache miss: launch", ta: cached, mod: func(w *World) { w.Cache = cacheAnswer{Asked: true} }, want: want{launch: true}},
		{name: "success of a cache miss: the outputs are stored first", ta: func(t testing.TB) *flytev1.TaskAction {
			ta := runningTA(t, cached(t))
			ta.Status.CacheStatus = flytev1.CacheMiss
			return ta
		}, pod: ours("pod-1", t0, succeeded(now)), want: want{noWrite: true}},
		{name: "spec edited into something invalid while running: fails and its pod is stopped", ta: func(t testing.TB) *flytev1.TaskAction {
			ta := runningTA(t, cached(t))
			ta.Spec.Template.Container = nil
			return ta
		}, pod: ours("pod-1", t0, running(t0)), want: want{events: "1:FAILED:v38", history: "Queued,Executing,InvalidSpec", reason: "InvalidSpec", code: CodeInvalidSpec, attempts: 1, deletes: "pod-1", finish: true}},
		{name: "terminal, pod still running (cache hit after a crash): stopped, then released", ta: func(t testing.TB) *flytev1.TaskAction {
			ta := cached(t)
			p := testDecider.decide(World{TA: ta, Task: worldOf(t, ta, resource{}).Task, Cache: cacheAnswer{Asked: true, Hit: &cache.Entry{}}}, t0)
			ta = applied(ta, p)
			ta.Finalizers = []string{flytev1.Finalizer}
			return ta
		}, pod: ours("pod-1", t0, running(t0)), want: want{noWrite: true, deletes: "pod-1", finish: true}},
		{name: "deleted while running: ABORTED, pod deleted, finalizer removed", ta: func(t testing.TB) *flytev1.TaskAction {
			ta := runningTA(t, newTA(0))
			ta.DeletionTimestamp = &deleting
			return ta
		}, pod: ours("pod-1", t0, running(t0)), want: want{events: "1:ABORTED:v39", noWrite: true, deletes: "pod-1", removeFin: true}},
		{name: "deleted after its end: no event, its finished pod left to its owner reference", ta: func(t testing.TB) *flytev1.TaskAction {
			ta := runningTA(t, newTA(0))
			p := testDecider.decide(worldOf(t, ta, ours("pod-1", t0, succeeded(t0))), t0)
			ta = applied(ta, p)
			ta.Finalizers = []string{flytev1.Finalizer}
			ta.DeletionTimestamp = &deleting
			return ta
		}, pod: ours("pod-1", t0, succeeded(t0)), want: want{noWrite: true, removeFin: true, finish: true}},
		{name: "another TaskAction has the same identity: refused", ta: func(testing.TB) *flytev1.TaskAction { return newTA(0) },
			mod:  func(w *World) { w.Duplicate = &duplicateAction{Name: "other/hello"} },
			want: want{history: "InvalidSpec", reason: "InvalidSpec", code: CodeDuplicateAction, attempts: 1, finish: true}},
		{name: "error.pb non-recoverable after exit 0, retries left: fails at once", ta: func(t testing.TB) *flytev1.TaskAction { return runningTA(t, newTA(2)) },
			pod: ours("pod-1", t0, succeeded(now)), mod: runtimeSays("ValueError", core.ExecutionError_USER, false),
			want: want{events: "1:FAILED:v38", history: "Queued,Executing,PermanentFailure", reason: "PermanentFailure", code: "ValueError", attempts: 1, finish: true}},
		{name: "error.pb non-recoverable SYSTEM after a failed pod: fails at once", ta: func(t testing.TB) *flytev1.TaskAction { return runningTA(t, newTA(2)) },
			pod: ours("pod-1", t0, userFailure(now)), mod: runtimeSays("OOM", core.ExecutionError_SYSTEM, false),
			want: want{events: "1:FAILED:v38", history: "Queued,Executing,PermanentFailure", reason: "PermanentFailure", code: "OOM", attempts: 1, finish: true}},
		{name: "error.pb recoverable USER after exit 0: retried", ta: func(t testing.TB) *flytev1.TaskAction { return runningTA(t, newTA(1)) },
			pod: ours("pod-1", t0, succeeded(now)), mod: runtimeSays("Flaky", core.ExecutionError_USER, true),
			want: want{events: "2:QUEUED:v1", history: "Queued,Executing,RetryableFailure", reason: "RetryableFailure", code: "Flaky", attempts: 2, deletes: "pod-1", wake: wakeNow}},
		{name: "error.pb recoverable SYSTEM: a system failure of the same attempt", ta: running0,
			pod: ours("pod-1", t0, succeeded(now)), mod: runtimeSays("Net", core.ExecutionError_SYSTEM, true),
			want: want{history: "Queued,Executing", reason: "Executing", code: "Net", attempts: 1, sysFailures: 1, deletes: "pod-1", wake: 10 * time.Second}},
		{name: "no error.pb: the exit code decides", ta: func(t testing.TB) *flytev1.TaskAction { return runningTA(t, newTA(1)) },
			pod: ours("pod-1", t0, userFailure(now)), mod: func(w *World) {
				w.RuntimeError = &runtimeError{Doc: storage.TaskError{Code: storage.CodeErrorFileNotFound}}
			},
			want: want{events: "2:QUEUED:v1", history: "Queued,Executing,RetryableFailure", reason: "RetryableFailure", code: "Error", attempts: 2, deletes: "pod-1", wake: wakeNow}},
		{name: "no error.pb after exit 0: succeeded", ta: running0,
			pod: ours("pod-1", t0, succeeded(now)), mod: func(w *World) {
				w.RuntimeError = &runtimeError{Doc: storage.TaskError{Code: storage.CodeErrorFileNotFound}}
			},
			want: want{events: "1:SUCCEEDED:v37", history: "Queued,Executing,Completed", reason: "Completed", attempts: 1, finish: true}},
		{name: "error.pb unreadable: system failure with backoff", ta: running0,
			pod: ours("pod-1", t0, succeeded(now)), mod: func(w *World) { w.RuntimeError = &runtimeError{StorageErr: errors.New("bucket unreachable")} },
			want: want{history: "Queued,Executing", reason: "Executing", code: CodeStorageError, attempts: 1, sysFailures: 1, deletes: "pod-1", wake: 10 * time.Second}},
		{name: "inputs unreadable before launch: system failure with backoff, no launch", ta: func(testing.TB) *flytev1.TaskAction { return newTA(0) },
			mod:  func(w *World) { w.InputsKey = &inputsKey{StorageErr: errors.New("bucket unreachable")} },
			want: want{code: CodeStorageError, sysFailures: 1, wake: 10 * time.Second}},
		{name: "the cache has not seen our pod yet: wait, nothing concluded", ta: launched0,
			mod:  func(w *World) { w.PodCacheBehind = true },
			want: want{noWrite: true, wake: wakeCacheLag}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := tc.ta(t)
			w := worldOf(t, ta, tc.pod)
			if tc.mod != nil {
				tc.mod(&w)
			}
			at := tc.now
			if at.IsZero() {
				at = now
			}
			p := testDecider.decide(w, at)
			checkPlan(t, ta, p, tc.want)
		})
	}
}

// runtimeSays is a World whose attempt left an error.pb with this error.
func runtimeSays(code string, kind core.ExecutionError_ErrorKind, recoverable bool) func(*World) {
	return func(w *World) {
		w.RuntimeError = &runtimeError{Doc: storage.TaskError{Code: code, Kind: kind, Recoverable: recoverable, Message: code + " in the task"}}
	}
}

func launched0(t testing.TB) *flytev1.TaskAction { return launchedTA(t, newTA(0)) }

func running0(t testing.TB) *flytev1.TaskAction { return runningTA(t, newTA(0)) }

func cached(testing.TB) *flytev1.TaskAction {
	ta := newTA(0)
	ta.Spec.CacheKey = "k1"
	return ta
}

func checkPlan(t *testing.T, ta *flytev1.TaskAction, p Plan, w want) {
	t.Helper()
	if got := evs(p.Events); got != w.events {
		t.Errorf("events = %q, want %q", got, w.events)
	}
	if w.noWrite {
		if !equalStatus(ta.Status, p.Status) {
			t.Errorf("status changed:\nfrom %+v\nto   %+v", ta.Status, p.Status)
		}
	} else {
		st := p.Status
		if got := history(st); got != w.history {
			t.Errorf("history = %q, want %q", got, w.history)
		}
		reason := ""
		for _, typ := range []string{flytev1.ConditionSucceeded, flytev1.ConditionFailed, flytev1.ConditionProgressing} {
			if c := meta.FindStatusCondition(st.Conditions, typ); c != nil && (c.Status == metav1.ConditionTrue || typ == flytev1.ConditionProgressing) {
				reason = c.Reason
				break
			}
		}
		if reason != w.reason {
			t.Errorf("reason = %q, want %q", reason, w.reason)
		}
		code := ""
		if st.ErrorState != nil {
			code = st.ErrorState.Code
		}
		if code != w.code {
			t.Errorf("errorState.code = %q, want %q", code, w.code)
		}
		if st.Attempts != w.attempts || st.SystemFailures != w.sysFailures {
			t.Errorf("attempts, systemFailures = %d, %d; want %d, %d", st.Attempts, st.SystemFailures, w.attempts, w.sysFailures)
		}
	}
	var dels []string
	for _, d := range p.Delete {
		dels = append(dels, string(d.UID))
	}
	if got := strings.Join(dels, ","); got != w.deletes {
		t.Errorf("deletes = %q, want %q", got, w.deletes)
	}
	if p.Launch != w.launch || p.Status.IsTerminal() != w.finish || p.RemoveFinalizer != w.removeFin {
		t.Errorf("launch, finish, removeFinalizer = %v, %v, %v; want %v, %v, %v", p.Launch, p.Status.IsTerminal(), p.RemoveFinalizer, w.launch, w.finish, w.removeFin)
	}
	switch {
	case w.wake == -1 && p.WakeAfter <= 0:
		t.Errorf("no wake-up")
	case w.wake >= 0 && p.WakeAfter != w.wake:
		t.Errorf("wake after %v, want %v", p.WakeAfter, w.wake)
	}
	// Every state that is not terminal has a wake-up (issue 10, item 3).
	if !p.Status.IsTerminal() && ta.DeletionTimestamp.IsZero() && !p.Launch && p.Populate == nil && p.WakeAfter <= 0 {
		t.Errorf("a non-terminal plan without a wake-up")
	}
}

func equalStatus(a, b flytev1.TaskActionStatus) bool {
	return string(mustJSON(a)) == string(mustJSON(b))
}

// TestRetriedAttemptSendsNoFailed: Flyte's runs service takes a FAILED event
// as its attempt's end and ends the action's watch with the latest attempt's;
// so the failure of an attempt that is retried is reported as the next
// attempt's QUEUED event, which carries the error, and only the last
// attempt's failure is FAILED.
func TestRetriedAttemptSendsNoFailed(t *testing.T) {
	now := t0.Add(time.Minute)
	cases := []struct {
		name       string
		retries    int32
		pod        plugin.Observation
		mod        func(*World)
		wantEvent  string // attempt:PHASE:vVERSION
		wantCode   string
		wantKind   string
		wantPrefix int32 // the attempt whose output prefix the event carries
	}{
		{name: "exit code, retries left", retries: 1, pod: userFailure(now),
			wantEvent: "2:QUEUED:v1", wantCode: "Error", wantKind: "USER", wantPrefix: 2},
		{name: "recoverable error.pb, retries left", retries: 2, pod: succeeded(now), mod: runtimeSays("Flaky", core.ExecutionError_USER, true),
			wantEvent: "2:QUEUED:v1", wantCode: "Flaky", wantKind: "USER", wantPrefix: 2},
		{name: "exit code, no retries left: FAILED", retries: 0, pod: userFailure(now),
			wantEvent: "1:FAILED:v38", wantCode: "Error", wantKind: "USER", wantPrefix: 1},
		{name: "non-recoverable error.pb, retries left: FAILED", retries: 2, pod: succeeded(now), mod: runtimeSays("ValueError", core.ExecutionError_USER, false),
			wantEvent: "1:FAILED:v38", wantCode: "ValueError", wantKind: "USER", wantPrefix: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := runningTA(t, newTA(tc.retries))
			w := worldOf(t, ta, ours("pod-1", t0, tc.pod))
			if tc.mod != nil {
				tc.mod(&w)
			}
			p := testDecider.decide(w, now)
			if got := evs(p.Events); got != tc.wantEvent {
				t.Fatalf("events = %s, want %s", got, tc.wantEvent)
			}
			ev := p.Events[0]
			if ev.Error == nil || ev.Error.Code != tc.wantCode || ev.Error.Kind != tc.wantKind {
				t.Errorf("error = %+v, want code %s kind %s", ev.Error, tc.wantCode, tc.wantKind)
			}
			if want := task.OutputPrefix(ta, tc.wantPrefix) + "/outputs.pb"; ev.OutputURI != want {
				t.Errorf("output URI = %s, want %s", ev.OutputURI, want)
			}
			if ev.Phase == events.PhaseQueued {
				if len(ev.ClusterEvents) != 1 || !strings.Contains(ev.ClusterEvents[0].Message, "attempt 1 failed and is retried as attempt 2") {
					t.Errorf("cluster events = %+v, want the retried attempt named", ev.ClusterEvents)
				}
				if ev.PodName != "" || ev.LogContext != nil {
					t.Errorf("the next attempt's QUEUED names the failed attempt's pod: %q %v", ev.PodName, ev.LogContext)
				}
			}
		})
	}
}

func historyOf(st flytev1.TaskActionStatus) string {
	var s []string
	for _, h := range st.PhaseHistory {
		s = append(s, h.Phase)
	}
	return strings.Join(s, ",")
}

// TestAbortCountsAnUnrecordedAttempt is issue 35, item 2 (the abort): a
// TaskAction deleted while its pod's first statuses are held back writes its
// attempt count before it is let go (Flyte's control plane records the
// attempts of an aborted action from the status it last saw), with the QUEUED
// it reported at the launch and its ABORTED.
func TestAbortCountsAnUnrecordedAttempt(t *testing.T) {
	d := testDecider
	d.QueuedDelay = 5 * time.Second
	ta := newTA(0)
	w := worldOf(t, ta, ours("pod-1", t0, plugin.Observation{Phase: plugin.PhaseQueued}))
	w.Launch = &launchOutcome{}
	launch := d.decide(w, t0)
	if !reflect.DeepEqual(launch.Status, ta.Status) {
		t.Fatal("the launch's Queued was not held back")
	}
	deleted := ta.DeepCopy()
	deleted.DeletionTimestamp = ptrTo(metav1.NewTime(t0.Add(3 * time.Second)))
	p := d.decide(worldOf(t, deleted, ours("pod-1", t0, running(t0.Add(time.Second)))), t0.Add(3*time.Second))
	if p.Status.Attempts != 1 || historyOf(p.Status) != "Queued" || evs(p.Events) != "1:QUEUED:v1 1:ABORTED:v23" ||
		!reflect.DeepEqual(p.Events[0], launch.Events[0]) || !p.RemoveFinalizer || len(p.Delete) != 1 {
		t.Errorf("deleted with its launch unrecorded: attempts %d, history %s, events %s, release %v, deletes %v; want attempt 1 written, then let go",
			p.Status.Attempts, historyOf(p.Status), evs(p.Events), p.RemoveFinalizer, p.Delete)
	}
	// Recorded already: nothing more is written.
	recorded := applied(ta, d.decide(worldOf(t, ta, ours("pod-1", t0, running(t0.Add(time.Second)))), t0.Add(2*time.Second)))
	recorded.DeletionTimestamp = deleted.DeletionTimestamp
	if p := d.decide(worldOf(t, recorded, ours("pod-1", t0, running(t0.Add(time.Second)))), t0.Add(3*time.Second)); !equalStatus(recorded.Status, p.Status) || evs(p.Events) != "1:ABORTED:v39" {
		t.Errorf("deleted with its attempt recorded: status written %v, events %s", !equalStatus(recorded.Status, p.Status), evs(p.Events))
	}
}
