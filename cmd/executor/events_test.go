package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
)

func TestEventsList(t *testing.T) {
	srv := eventsvctest.Start(t, eventsvctest.Options{})
	b := events.NewBatcher(events.NewClient(srv.URL, nil), events.BatcherOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = b.Start(ctx) }()
	at := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	for _, ev := range []events.Event{
		{Project: "p", Domain: "d", Run: "r", Action: "a0", Attempt: 1, Phase: events.PhaseRunning, UpdatedAt: at},
		{Project: "p", Domain: "d", Run: "r", Action: "a0", Attempt: 1, Phase: events.PhaseFailed, Version: 2, UpdatedAt: at.Add(time.Second),
			Error: &events.ErrorInfo{Code: "OOMKilled", Kind: "USER", Message: "out of memory"}},
		{Project: "p", Domain: "d", Run: "other", Action: "a0", Attempt: 1, Phase: events.PhaseQueued, UpdatedAt: at},
	} {
		if err := b.Record(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		flags listFlags
		want  []string // lines, each checked by substring
	}{
		{"table", listFlags{run: "r", output: "table"}, []string{
			"TIME", "2026-12-02T18:00:00.000Z  a0      1        RUNNING  0", "FAILED   2        OOMKilled"}},
		{"json", listFlags{run: "r", output: "json"}, []string{`"phase":"RUNNING"`, `"errorCode":"OOMKilled"`}},
		{"other project is empty", listFlags{run: "r", project: "x", output: "json"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			tc.flags.url = srv.URL
			if err := listEvents(context.Background(), &out, tc.flags); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			if out.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tc.want) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(tc.want), out.String())
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %d %q lacks %q", i, lines[i], w)
				}
				if tc.flags.output == "json" {
					var m map[string]any
					if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
						t.Fatalf("line %d is not JSON: %v", i, err)
					}
					for _, k := range []string{"action", "attempt", "phase", "version", "errorCode"} {
						if _, ok := m[k]; !ok {
							t.Errorf("line %d lacks %q", i, k)
						}
					}
				}
			}
		})
	}
}
