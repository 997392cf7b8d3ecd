package eventsvc_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/taskaction/executor/gen/flyteidl2/common"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/task"
	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/internal/sqlstore"
	"github.com/taskaction/executor/pkg/eventsvc"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
)

// ev is an event; msg marks it (as its primary pod) so tests can tell copies apart.
func ev(run, action string, attempt uint32, phase common.ActionPhase, version uint32, msg string) *workflow.ActionEvent {
	e := &workflow.ActionEvent{
		Id: &common.ActionIdentifier{
			Run:  &common.RunIdentifier{Org: "o", Project: "p", Domain: "d", Name: run},
			Name: action,
		},
		Attempt:     attempt,
		Phase:       phase,
		Version:     version,
		UpdatedTime: timestamppb.New(time.Unix(1700000000, 123456789)),
	}
	if msg != "" {
		e.LogContext = &core.LogContext{PrimaryPodName: msg}
	}
	if phase == common.ActionPhase_ACTION_PHASE_FAILED {
		e.ErrorInfo = &workflow.ErrorInfo{Message: "[OOMKilled] " + msg, Kind: workflow.ErrorInfo_KIND_USER}
	}
	return e
}

func marker(e *workflow.ActionEvent) string { return e.GetLogContext().GetPrimaryPodName() }

// storeBackends: per backend, a setup run once in the backend's test that
// returns an opener of an empty store per subtest. PostgreSQL shares one server.
func storeBackends() map[string]func(bt *testing.T) func(t *testing.T) eventsvc.Store {
	return map[string]func(bt *testing.T) func(t *testing.T) eventsvc.Store{
		"sqlite": func(*testing.T) func(t *testing.T) eventsvc.Store {
			return func(t *testing.T) eventsvc.Store {
				s, err := eventsvc.OpenSQLite(context.Background(), t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		},
		"postgres": func(bt *testing.T) func(t *testing.T) eventsvc.Store {
			dsn := eventsvctest.StartPostgres(bt)
			return func(t *testing.T) eventsvc.Store {
				s, err := eventsvc.OpenPostgres(context.Background(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				if err := truncate(s); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		},
	}
}

func truncate(s eventsvc.Store) error {
	return eventsvc.TruncateForTest(s)
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	const (
		q = common.ActionPhase_ACTION_PHASE_QUEUED
		r = common.ActionPhase_ACTION_PHASE_RUNNING
		f = common.ActionPhase_ACTION_PHASE_FAILED
	)
	cases := []struct {
		name    string
		batches [][]*workflow.ActionEvent
		// per batch: stored, duplicates
		want [][2]int
		// pod names of the run's events in storage order: shows which copy was kept
		wantKept []string
	}{
		{
			name:     "distinct events are all stored",
			batches:  [][]*workflow.ActionEvent{{ev("r1", "a", 1, q, 0, "x"), ev("r1", "a", 1, r, 0, "y"), ev("r1", "a", 1, f, 0, "z")}},
			want:     [][2]int{{3, 0}},
			wantKept: []string{"x", "y", "z"},
		},
		{
			name: "a resent event is stored once and the first is kept",
			batches: [][]*workflow.ActionEvent{
				{ev("r1", "a", 1, r, 0, "first")},
				{ev("r1", "a", 1, r, 0, "second"), ev("r1", "a", 1, r, 1, "v1")},
			},
			want:     [][2]int{{1, 0}, {1, 1}},
			wantKept: []string{"first", "v1"},
		},
		{
			name:     "repeats inside one batch keep the first",
			batches:  [][]*workflow.ActionEvent{{ev("r1", "a", 1, r, 0, "first"), ev("r1", "a", 1, r, 0, "second")}},
			want:     [][2]int{{1, 1}},
			wantKept: []string{"first"},
		},
		{
			name: "org, attempt, phase, version and action each make an event distinct",
			batches: [][]*workflow.ActionEvent{{
				ev("r1", "a", 1, r, 0, "base"), ev("r1", "a", 2, r, 0, "attempt"),
				ev("r1", "a", 1, q, 0, "phase"), ev("r1", "a", 1, r, 3, "version"), ev("r1", "b", 1, r, 0, "action"),
				func() *workflow.ActionEvent { e := ev("r1", "a", 1, r, 0, "org"); e.Id.Run.Org = "o2"; return e }(),
			}},
			want:     [][2]int{{6, 0}},
			wantKept: []string{"base", "attempt", "phase", "version", "action", "org"},
		},
	}
	for backend, setup := range storeBackends() {
		t.Run(backend, func(t *testing.T) {
			open := setup(t)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					s := open(t)
					for i, b := range tc.batches {
						stored, dups, err := s.Record(ctx, b)
						if err != nil {
							t.Fatalf("batch %d: %v", i, err)
						}
						if got := [2]int{stored, dups}; got != tc.want[i] {
							t.Errorf("batch %d: stored, duplicates = %v, want %v", i, got, tc.want[i])
						}
					}
					got, err := s.List(ctx, eventsvc.Query{Run: "r1", Limit: 100})
					if err != nil {
						t.Fatal(err)
					}
					var kept []string
					for _, se := range got {
						kept = append(kept, marker(se.Event))
					}
					if fmt.Sprint(kept) != fmt.Sprint(tc.wantKept) {
						t.Errorf("kept %v, want %v", kept, tc.wantKept)
					}
				})
			}
			t.Run("list filters and pages in storage order", func(t *testing.T) {
				s := open(t)
				var batch []*workflow.ActionEvent
				for i := range 25 {
					batch = append(batch, ev("r2", fmt.Sprintf("a%d", i%3), 1, r, uint32(i), ""))
				}
				batch = append(batch, ev("other", "a0", 1, r, 0, ""))
				if _, _, err := s.Record(ctx, batch); err != nil {
					t.Fatal(err)
				}
				var all []eventsvc.StoredEvent
				var after int64
				for {
					page, err := s.List(ctx, eventsvc.Query{Project: "p", Domain: "d", Run: "r2", AfterSeq: after, Limit: 10})
					if err != nil {
						t.Fatal(err)
					}
					all = append(all, page...)
					if len(page) < 10 {
						break
					}
					after = page[len(page)-1].Seq
				}
				if len(all) != 25 {
					t.Fatalf("paged %d events, want 25", len(all))
				}
				for i := 1; i < len(all); i++ {
					if all[i].Seq <= all[i-1].Seq {
						t.Fatalf("not in storage order at %d", i)
					}
				}
				a1, err := s.List(ctx, eventsvc.Query{Run: "r2", Action: "a1", Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				if len(a1) != 8 {
					t.Errorf("action a1: %d events, want 8", len(a1))
				}
				none, err := s.List(ctx, eventsvc.Query{Project: "nope", Run: "r2", Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				if len(none) != 0 {
					t.Errorf("project filter ignored: %d events", len(none))
				}
			})
			t.Run("events round-trip exactly", func(t *testing.T) {
				s := open(t)
				e := ev("r3", "a", 2, f, 4, "pod-1")
				e.ReportedTime = timestamppb.New(time.Unix(1700000001, 5))
				e.Cluster = "c1"
				e.Outputs = &task.OutputReferences{OutputUri: "s3://b/o/outputs.pb", ReportUri: "s3://b/o/report.html"}
				e.ClusterEvents = []*workflow.ClusterEvent{{OccurredAt: timestamppb.New(time.Unix(1700000000, 0)), Message: "Scheduled",
					Reason: "Scheduled", Type: workflow.ClusterEvent_TYPE_NORMAL}}
				e.LogInfo = []*core.TaskLog{{Name: "k8s", Uri: "http://logs/1", ShowWhilePending: true}}
				e.CacheStatus = core.CatalogCacheStatus_CACHE_MISS
				e.CacheMetadata = &common.CacheMetadata{SourceActionAttempt: &common.ActionAttemptIdentifier{ActionId: e.GetId(), Attempt: 1}}
				if _, _, err := s.Record(ctx, []*workflow.ActionEvent{e}); err != nil {
					t.Fatal(err)
				}
				got, err := s.List(ctx, eventsvc.Query{Run: "r3", Limit: 10})
				if err != nil || len(got) != 1 {
					t.Fatalf("list: %v, %d events", err, len(got))
				}
				if !protoEqual(got[0].Event, e) {
					t.Errorf("stored %v\nwant %v", got[0].Event, e)
				}
			})
		})
	}
}

func TestSQLiteSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := eventsvc.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Record(ctx, []*workflow.ActionEvent{ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0, "")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopening re-runs the migrations, which must be a no-op on a current schema.
	s, err = eventsvc.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	got, err := s.List(ctx, eventsvc.Query{Run: "r", Limit: 10})
	if err != nil || len(got) != 1 {
		t.Fatalf("after reopen: %v, %d events, want 1", err, len(got))
	}
	if _, dups, err := s.Record(ctx, []*workflow.ActionEvent{ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0, "")}); err != nil || dups != 1 {
		t.Fatalf("dedup across reopen: dups=%d err=%v", dups, err)
	}
}

func protoEqual(a, b *workflow.ActionEvent) bool { return proto.Equal(a, b) }

// TestMigrationFromV1 opens a database an older binary left at schema
// version 1, with a row of its own event message: the store moves the old
// table aside and works.
func TestMigrationFromV1(t *testing.T) {
	ctx := context.Background()
	for name, open := range map[string]func(t *testing.T) (*sqlstore.DB, func() (eventsvc.Store, error)){
		"sqlite": func(t *testing.T) (*sqlstore.DB, func() (eventsvc.Store, error)) {
			dir := t.TempDir()
			db, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, eventsvc.SQLiteFile), sqlstore.SQLiteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return db, func() (eventsvc.Store, error) { return eventsvc.OpenSQLite(ctx, dir) }
		},
		"postgres": func(t *testing.T) (*sqlstore.DB, func() (eventsvc.Store, error)) {
			dsn := eventsvctest.StartPostgres(t)
			db, err := sqlstore.OpenPostgres(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			return db, func() (eventsvc.Store, error) { return eventsvc.OpenPostgres(ctx, dsn) }
		},
	} {
		t.Run(name, func(t *testing.T) {
			db, openStore := open(t)
			defer func() { _ = db.Close() }()
			if err := eventsvc.MigrateToForTest(ctx, db, 1); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, db.Rebind(`INSERT INTO action_events (project, domain, run, action, attempt, phase, version,
				parent_action, updated_time_ns, reported_time_ns, error_code, error_kind, event, stored_at_ns)
				VALUES ('p', 'd', 'r', 'a', 1, 1, 0, '', 0, 0, '', 0, ?, 0)`), []byte{0x0a, 0x00}); err != nil {
				t.Fatal(err)
			}
			s, err := openStore()
			if err != nil {
				t.Fatalf("open over a version 1 database: %v", err)
			}
			defer func() { _ = s.Close() }()
			if got, err := s.List(ctx, eventsvc.Query{Run: "r", Limit: 10}); err != nil || len(got) != 0 {
				t.Fatalf("the old row must not be read as a Flyte event: %d events, %v", len(got), err)
			}
			if n, _, err := s.Record(ctx, []*workflow.ActionEvent{ev("r", "a", 1, common.ActionPhase_ACTION_PHASE_QUEUED, 0, "")}); err != nil || n != 1 {
				t.Fatalf("record after migrating: %d %v", n, err)
			}
			var legacy int
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM legacy_action_events`).Scan(&legacy); err != nil || legacy != 1 {
				t.Fatalf("legacy rows: %d %v, want the old row kept", legacy, err)
			}
		})
	}
}
