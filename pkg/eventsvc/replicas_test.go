package eventsvc_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	eventsv2 "github.com/taskaction/executor/gen/executor/events/v2"
	"github.com/taskaction/executor/gen/flyteidl2/common"
	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/internal/sqlstore"
	"github.com/taskaction/executor/pkg/eventsvc"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
)

// Two events-service replicas on one PostgreSQL database: replica A's
// Record takes its sequence number and is held before its commit while
// replica B records another event, and a watcher of B reads. Replicas used
// to commit out of sequence order then: the watcher read B's event, moved its
// cursor past A's number, and never saw A's event. Now B's Record waits for
// A's transaction, and the watcher sees every event in order.
func TestReplicasNeverSkipAnEvent(t *testing.T) {
	dsn := eventsvctest.StartPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func() eventsvc.Store {
		s, err := eventsvc.OpenPostgres(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	storeA, storeB := open(), open()
	a, b := newClients(startServer(t, storeA).URL(), nil), newClients(startServer(t, storeB).URL(), nil)
	locks, err := sqlstore.OpenPostgres(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locks.Close() }()

	const q, r, s = common.ActionPhase_ACTION_PHASE_QUEUED, common.ActionPhase_ACTION_PHASE_RUNNING, common.ActionPhase_ACTION_PHASE_SUCCEEDED
	stream, err := b.WatchActionEvents(ctx, connect.NewRequest(&eventsv2.WatchActionEventsRequest{Run: "run"}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	seen := make(chan string, 16)
	go func() {
		defer close(seen)
		for stream.Receive() {
			seen <- marker(stream.Msg().GetEvent())
		}
	}()
	next := func() string {
		t.Helper()
		m, ok := <-seen
		if !ok {
			t.Fatalf("the watch ended: %v", stream.Err())
		}
		return m
	}
	record(t, b, ev("run", "w", 1, q, 0, "start"))
	if got := next(); got != "start" {
		t.Fatalf("watcher saw %q first", got)
	}

	send := func(c clients, e *workflow.ActionEvent) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := c.Record(ctx, connect.NewRequest(&workflow.RecordRequest{Events: []*workflow.ActionEvent{e}}))
			done <- err
		}()
		return done
	}
	inserted, release := eventsvc.HoldCommitForTest(storeA)
	defer release()
	aDone := send(a, ev("run", "a", 1, r, 0, "from A"))
	<-inserted // A's event has its sequence number; A's transaction is open
	bDone := send(b, ev("run", "b", 1, r, 0, "from B"))
	// B either commits past A's open transaction, or waits for it in the
	// database: one of the two happens, whatever the timing.
	bFirst := false
	for waiting := false; !waiting && !bFirst; {
		select {
		case err := <-bDone:
			if err != nil {
				t.Fatalf("B: %v", err)
			}
			bFirst = true
			continue
		default:
		}
		var n int
		if err := locks.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if waiting = n > 0; !waiting {
			time.Sleep(time.Millisecond) // a poll of the condition, not a wait for an outcome
		}
	}
	if bFirst {
		// The watcher reads B's event while A's lower number is not committed.
		if got := next(); got != "from B" {
			t.Fatalf("watcher saw %q, want B's event", got)
		}
	}
	release()
	if err := <-aDone; err != nil {
		t.Fatalf("A: %v", err)
	}
	if !bFirst {
		if err := <-bDone; err != nil {
			t.Fatalf("B: %v", err)
		}
	}
	record(t, b, ev("run", "w", 1, s, 0, "end"))
	var got []string
	if bFirst {
		got = append(got, "from B")
	}
	for len(got) == 0 || got[len(got)-1] != "end" {
		got = append(got, next())
	}
	want := []string{"from A", "from B", "end"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("the watcher saw %q, want %q: an event was skipped", got, want)
	}
}
