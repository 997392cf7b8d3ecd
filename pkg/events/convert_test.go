package events

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/taskaction/executor/gen/flyteidl2/common"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/workflow"
)

func full() Event {
	at := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	return Event{
		Org: "o", Project: "p", Domain: "d", Run: "r", Action: "a",
		Attempt: 2, Phase: PhaseFailed, Version: 3,
		UpdatedAt: at, ReportedAt: at.Add(time.Second),
		Error:   &ErrorInfo{Code: "OOMKilled", Kind: "USER", Message: "out of memory"},
		Cluster: "c1", OutputURI: "s3://b/p/outputs.pb", ReportURI: "s3://b/p/report.html",
		ClusterEvents: []ClusterEvent{{OccurredAt: at, Message: "Scheduled", Reason: "Scheduled"}, {OccurredAt: at, Message: "back-off", Warning: true}},
		LogLinks:      []*core.TaskLog{{Name: "k8s", Uri: "http://logs", ShowWhilePending: true}},
		LogContext:    &core.LogContext{PrimaryPodName: "pod-a-2", Pods: []*core.PodLogContext{{Namespace: "ns", PodName: "pod-a-2"}}},
		CacheStatus:   "MISS", PodName: "pod-a-2",
		CacheSource: &CacheSource{Org: "o", Project: "p", Domain: "d", Run: "r0", Action: "a", Attempt: 1},
	}
}

func TestRoundTrip(t *testing.T) {
	cases := map[string]func(*Event){
		"every field":      func(*Event) {},
		"no error":         func(e *Event) { e.Error, e.Phase = nil, PhaseRunning },
		"no outputs":       func(e *Event) { e.OutputURI, e.ReportURI = "", "" },
		"system error":     func(e *Event) { e.Error.Kind = "SYSTEM" },
		"unknown kind":     func(e *Event) { e.Error.Kind = "" },
		"every phase kept": func(e *Event) { e.Phase = PhaseTimedOut },
		"paused":           func(e *Event) { e.Phase, e.Error = PhasePaused, nil },
		"no org":           func(e *Event) { e.Org = "" },
		"no cache source":  func(e *Event) { e.CacheSource = nil },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			ev := full()
			mutate(&ev)
			p, err := ToProto(ev)
			if err != nil {
				t.Fatal(err)
			}
			if got := FromProto(p); !reflect.DeepEqual(got, ev) {
				t.Errorf("round trip\n got %+v\nwant %+v", got, ev)
			}
		})
	}
}

func TestErrorCodeTravelsInTheMessage(t *testing.T) {
	p, err := ToProto(full())
	if err != nil {
		t.Fatal(err)
	}
	if p.GetErrorInfo().GetMessage() != "[OOMKilled] out of memory" || p.GetErrorInfo().GetKind() != workflow.ErrorInfo_KIND_USER {
		t.Fatalf("error %v", p.GetErrorInfo())
	}
}

func TestParseErrorMessage(t *testing.T) {
	for _, tc := range []struct{ in, code, msg string }{
		{"[OOMKilled] out of memory", "OOMKilled", "out of memory"},
		{"[USER:ValueError] bad [input]", "USER:ValueError", "bad [input]"},
		{"[Code]", "Code", ""},
		{"plain message from another executor", "", "plain message from another executor"},
		{"[not a code] x", "", "[not a code] x"},
		{"", "", ""},
	} {
		code, msg := ParseErrorMessage(tc.in)
		if code != tc.code || msg != tc.msg {
			t.Errorf("ParseErrorMessage(%q) = %q, %q; want %q, %q", tc.in, code, msg, tc.code, tc.msg)
		}
		if tc.code != "" && ErrorMessage(code, msg) != tc.in {
			t.Errorf("ErrorMessage(%q, %q) = %q, want %q", code, msg, ErrorMessage(code, msg), tc.in)
		}
	}
}

func TestParentActionIsNotSent(t *testing.T) {
	ev := full()
	ev.ParentAction = "root"
	p, err := ToProto(ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := FromProto(p).ParentAction; got != "" {
		t.Fatalf("parent %q travelled; Flyte's ActionEvent has no field for it", got)
	}
}

func TestPodNameBecomesTheLogContext(t *testing.T) {
	ev := full()
	ev.LogContext = nil
	p, err := ToProto(ev)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetLogContext().GetPrimaryPodName() != "pod-a-2" || p.GetLogContext().GetPods()[0].GetPodName() != "pod-a-2" {
		t.Fatalf("log context %v", p.GetLogContext())
	}
	if FromProto(p).PodName != "pod-a-2" {
		t.Fatal("pod name lost")
	}
}

func TestPhasesMapBothWays(t *testing.T) {
	want := map[Phase]common.ActionPhase{
		PhaseQueued: common.ActionPhase_ACTION_PHASE_QUEUED, PhaseWaitingForResources: common.ActionPhase_ACTION_PHASE_WAITING_FOR_RESOURCES,
		PhaseInitializing: common.ActionPhase_ACTION_PHASE_INITIALIZING, PhaseRunning: common.ActionPhase_ACTION_PHASE_RUNNING,
		PhaseSucceeded: common.ActionPhase_ACTION_PHASE_SUCCEEDED, PhaseFailed: common.ActionPhase_ACTION_PHASE_FAILED,
		PhaseAborted: common.ActionPhase_ACTION_PHASE_ABORTED, PhaseTimedOut: common.ActionPhase_ACTION_PHASE_TIMED_OUT,
		PhasePaused: common.ActionPhase_ACTION_PHASE_PAUSED, PhaseRecovered: common.ActionPhase_ACTION_PHASE_RECOVERED,
	}
	for ph, pp := range want {
		if got := PhaseToProto(ph); got != pp {
			t.Errorf("PhaseToProto(%s) = %v, want %v", ph, got, pp)
		}
		if got := PhaseFromProto(pp); got != ph {
			t.Errorf("PhaseFromProto(%v) = %s, want %s", pp, got, ph)
		}
	}
	for _, bad := range []Phase{"", "BOGUS", "UNSPECIFIED"} {
		if got := PhaseToProto(bad); got != common.ActionPhase_ACTION_PHASE_UNSPECIFIED {
			t.Errorf("PhaseToProto(%q) = %v, want UNSPECIFIED", bad, got)
		}
	}
}

func TestCacheStatusNames(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want core.CatalogCacheStatus
		bad  bool
	}{
		{"", core.CatalogCacheStatus_CACHE_DISABLED, false},
		{"HIT", core.CatalogCacheStatus_CACHE_HIT, false},
		{"CACHE_HIT", core.CatalogCacheStatus_CACHE_HIT, false},
		{"lookup_failure", core.CatalogCacheStatus_CACHE_LOOKUP_FAILURE, false},
		{"EVICTED", core.CatalogCacheStatus_CACHE_EVICTED, false},
		{"MAYBE", 0, true},
	} {
		got, err := CacheStatusToProto(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("CacheStatusToProto(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
	if CacheStatusName(core.CatalogCacheStatus_CACHE_PUT_FAILURE) != "PUT_FAILURE" {
		t.Error("CacheStatusName")
	}
}

func TestValidation(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Event)
		want   string // substring of the error; "" for valid
	}{
		{"valid", func(*Event) {}, ""},
		{"missing project", func(e *Event) { e.Project = "" }, "missing project"},
		{"missing domain", func(e *Event) { e.Domain = "" }, "missing domain"},
		{"missing run", func(e *Event) { e.Run = "" }, "missing run"},
		{"missing action", func(e *Event) { e.Action = "" }, "missing action"},
		{"attempt 0", func(e *Event) { e.Attempt = 0 }, "attempt must be at least 1"},
		{"negative attempt", func(e *Event) { e.Attempt = -1 }, "must not be negative"},
		{"no phase", func(e *Event) { e.Phase = "" }, "not a reportable phase"},
		{"unknown phase", func(e *Event) { e.Phase = "SLEEPING" }, "unknown phase"},
		{"unknown cache status", func(e *Event) { e.CacheStatus = "MAYBE" }, "unknown cache status"},
		{"org too long", func(e *Event) { e.Org = strings.Repeat("o", 300) }, "org longer than"},
		{"no time", func(e *Event) { e.UpdatedAt = time.Time{} }, "missing updated time"},
		{"an error without a code is fine", func(e *Event) { e.Error.Code = "" }, ""},
		{"bad error kind", func(e *Event) { e.Error.Kind = "BOTH" }, "error kind"},
		{"identity too long", func(e *Event) { e.Action = strings.Repeat("x", 300) }, "longer than"},
		{"several problems at once", func(e *Event) { e.Run, e.Attempt = "", 0 }, "missing run; attempt must be"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := full()
			tc.mutate(&ev)
			_, err := ToProto(ev)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalidEvent) {
				t.Errorf("%v does not wrap ErrInvalidEvent", err)
			}
		})
	}
}
