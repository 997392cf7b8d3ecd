package eventsvc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/taskaction/executor/gen/executor/events/v1"
	"github.com/taskaction/executor/pkg/eventsvc"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
)

func ev(run, action string, attempt uint32, phase eventsv1.Phase, version uint32, msg string) *eventsv1.ActionEvent {
	e := &eventsv1.ActionEvent{
		Id:          &eventsv1.ActionIdentifier{Project: "p", Domain: "d", Run: run, Action: action},
		Attempt:     attempt,
		Phase:       phase,
		Version:     version,
		UpdatedTime: timestamppb.New(time.Unix(1700000000, 123456789)),
		PodName:     msg,
	}
	if phase == eventsv1.Phase_PHASE_FAILED {
		e.Error = &eventsv1.ErrorInfo{Code: "OOMKilled", Kind: eventsv1.ErrorKind_ERROR_KIND_USER, Message: msg}
	}
	return e
}

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
		q = eventsv1.Phase_PHASE_QUEUED
		r = eventsv1.Phase_PHASE_RUNNING
		f = eventsv1.Phase_PHASE_FAILED
	)
	cases := []struct {
		name    string
		batches [][]*eventsv1.ActionEvent
		// per batch: stored, duplicates
		want [][2]int
		// pod names of the run's events in storage order: shows which copy was kept
		wantKept []string
	}{
		{
			name:     "distinct events are all stored",
			batches:  [][]*eventsv1.ActionEvent{{ev("r1", "a", 1, q, 0, "x"), ev("r1", "a", 1, r, 0, "y"), ev("r1", "a", 1, f, 0, "z")}},
			want:     [][2]int{{3, 0}},
			wantKept: []string{"x", "y", "z"},
		},
		{
			name: "a resent event is stored once and the first is kept",
			batches: [][]*eventsv1.ActionEvent{
				{ev("r1", "a", 1, r, 0, "first")},
				{ev("r1", "a", 1, r, 0, "second"), ev("r1", "a", 1, r, 1, "v1")},
			},
			want:     [][2]int{{1, 0}, {1, 1}},
			wantKept: []string{"first", "v1"},
		},
		{
			name:     "repeats inside one batch keep the first",
			batches:  [][]*eventsv1.ActionEvent{{ev("r1", "a", 1, r, 0, "first"), ev("r1", "a", 1, r, 0, "second")}},
			want:     [][2]int{{1, 1}},
			wantKept: []string{"first"},
		},
		{
			name: "attempt, phase, version and action each make an event distinct",
			batches: [][]*eventsv1.ActionEvent{{
				ev("r1", "a", 1, r, 0, "base"), ev("r1", "a", 2, r, 0, "attempt"),
				ev("r1", "a", 1, q, 0, "phase"), ev("r1", "a", 1, r, 3, "version"), ev("r1", "b", 1, r, 0, "action"),
			}},
			want:     [][2]int{{5, 0}},
			wantKept: []string{"base", "attempt", "phase", "version", "action"},
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
						kept = append(kept, se.Event.GetPodName())
					}
					if fmt.Sprint(kept) != fmt.Sprint(tc.wantKept) {
						t.Errorf("kept %v, want %v", kept, tc.wantKept)
					}
				})
			}
			t.Run("list filters and pages in storage order", func(t *testing.T) {
				s := open(t)
				var batch []*eventsv1.ActionEvent
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
				e.ParentAction = "root"
				e.ReportedTime = timestamppb.New(time.Unix(1700000001, 5))
				e.Cluster = "c1"
				e.Outputs = &eventsv1.OutputReferences{OutputUri: "s3://b/o/outputs.pb", ReportUri: "s3://b/o/report.html"}
				e.ClusterEvents = []*eventsv1.ClusterEvent{{OccurredAt: timestamppb.New(time.Unix(1700000000, 0)), Message: "Scheduled"}}
				e.LogLinks = []*eventsv1.LogLink{{Name: "k8s", Uri: "http://logs/1"}}
				e.CacheStatus = "CACHE_MISS"
				if _, _, err := s.Record(ctx, []*eventsv1.ActionEvent{e}); err != nil {
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
	if _, _, err := s.Record(ctx, []*eventsv1.ActionEvent{ev("r", "a", 1, eventsv1.Phase_PHASE_QUEUED, 0, "")}); err != nil {
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
	if _, dups, err := s.Record(ctx, []*eventsv1.ActionEvent{ev("r", "a", 1, eventsv1.Phase_PHASE_QUEUED, 0, "")}); err != nil || dups != 1 {
		t.Fatalf("dedup across reopen: dups=%d err=%v", dups, err)
	}
}

func protoEqual(a, b *eventsv1.ActionEvent) bool { return proto.Equal(a, b) }
