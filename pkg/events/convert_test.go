package events

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	eventsv1 "github.com/taskaction/executor/gen/executor/events/v1"
)

func full() Event {
	at := time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)
	return Event{
		Project: "p", Domain: "d", Run: "r", Action: "a", ParentAction: "root",
		Attempt: 2, Phase: PhaseFailed, Version: 3,
		UpdatedAt: at, ReportedAt: at.Add(time.Second),
		Error:   &ErrorInfo{Code: "OOMKilled", Kind: "USER", Message: "out of memory"},
		Cluster: "c1", OutputURI: "s3://b/p/outputs.pb", ReportURI: "s3://b/p/report.html",
		ClusterEvents: []ClusterEvent{{OccurredAt: at, Message: "Scheduled"}},
		LogLinks:      []LogLink{{Name: "k8s", URI: "http://logs"}},
		CacheStatus:   "CACHE_MISS", PodName: "pod-a-2",
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

func TestErrorCodeIsSent(t *testing.T) {
	p, err := ToProto(full())
	if err != nil {
		t.Fatal(err)
	}
	if p.GetError().GetCode() != "OOMKilled" || p.GetError().GetKind() != eventsv1.ErrorKind_ERROR_KIND_USER {
		t.Fatalf("error %v", p.GetError())
	}
}

func TestPhasesMapBothWays(t *testing.T) {
	for _, ph := range []Phase{PhaseQueued, PhaseWaitingForResources, PhaseInitializing, PhaseRunning,
		PhaseSucceeded, PhaseFailed, PhaseAborted, PhaseTimedOut} {
		pp := PhaseToProto(ph)
		if pp == eventsv1.Phase_PHASE_UNSPECIFIED || PhaseFromProto(pp) != ph ||
			strings.TrimPrefix(pp.String(), "PHASE_") != string(ph) {
			t.Errorf("phase %s maps to %v", ph, pp)
		}
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
		{"unknown phase", func(e *Event) { e.Phase = "PAUSED" }, "unknown phase"},
		{"no time", func(e *Event) { e.UpdatedAt = time.Time{} }, "missing updated time"},
		{"error without code", func(e *Event) { e.Error.Code = "" }, "error without a code"},
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
