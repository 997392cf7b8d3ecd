package cachesvc_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/cachesvc"
	"github.com/taskaction/executor/pkg/cachesvc/cachesvctest"
	"github.com/taskaction/executor/pkg/eventsvc"
)

// db is a backend for migration tests: how to open the cache store, the
// events store and a raw connection on the same database.
type db struct {
	openCache  func(t *testing.T) (cachesvc.Store, error)
	openEvents func(t *testing.T) (eventsvc.Store, error)
	raw        func(t *testing.T) *sql.DB
}

func databases() map[string]func(t *testing.T) db {
	ctx := context.Background()
	return map[string]func(t *testing.T) db{
		"sqlite": func(t *testing.T) db {
			dir := t.TempDir()
			return db{
				openCache:  func(*testing.T) (cachesvc.Store, error) { return cachesvc.OpenSQLite(ctx, dir) },
				openEvents: func(*testing.T) (eventsvc.Store, error) { return eventsvc.OpenSQLite(ctx, dir) },
				raw:        func(t *testing.T) *sql.DB { return rawDB(t, "sqlite", filepath.Join(dir, cachesvc.SQLiteFile)) },
			}
		},
		"postgres": func(t *testing.T) db {
			dsn := cachesvctest.StartPostgres(t) // a fresh server: these tests change the schema
			return db{
				openCache:  func(*testing.T) (cachesvc.Store, error) { return cachesvc.OpenPostgres(ctx, dsn) },
				openEvents: func(*testing.T) (eventsvc.Store, error) { return eventsvc.OpenPostgres(ctx, dsn) },
				raw:        func(t *testing.T) *sql.DB { return rawDB(t, "pgx", dsn) },
			}
		},
	}
}

func rawDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	d, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestMigrations(t *testing.T) {
	ctx := context.Background()
	key := cache.Key{Org: "o", Project: "p", Domain: "d", Key: "k"}
	for name, backend := range databases() {
		t.Run(name, func(t *testing.T) {
			b := backend(t)
			// The events service first: it shares the directory or database
			// and must not make the cache think it is migrated.
			ev, err := b.openEvents(t)
			if err != nil {
				t.Fatalf("events store: %v", err)
			}
			defer func() { _ = ev.Close() }()
			st, err := b.openCache(t)
			if err != nil {
				t.Fatalf("first open: %v", err)
			}
			if ok, err := st.Put(ctx, key, cache.Entry{OutputURI: "s3://b/o", LastUpdatedAt: t0}, false, time.Time{}); err != nil || !ok {
				t.Fatalf("put: %v %v", ok, err)
			}
			_ = st.Close()

			// Reopening keeps the data and applies nothing twice.
			st, err = b.openCache(t)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			e, ok, err := st.Get(ctx, key, time.Time{})
			if err != nil || !ok || e.OutputURI != "s3://b/o" || !e.CreatedAt.Equal(t0) {
				t.Fatalf("after reopen: %+v %v %v", e, ok, err)
			}
			_ = st.Close()
			raw := b.raw(t)
			var versions int
			if err := raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM cache_schema_migrations`).Scan(&versions); err != nil || versions != 2 {
				t.Fatalf("cache schema versions: %d %v, want 2", versions, err)
			}

			// A database migrated by a newer binary is refused.
			if _, err := raw.ExecContext(ctx, `INSERT INTO cache_schema_migrations (version, applied_at_ns) VALUES (99, 0)`); err != nil {
				t.Fatal(err)
			}
			st, err = b.openCache(t)
			if err == nil {
				_ = st.Close()
				t.Fatal("open of a newer schema: want an error")
			}
			if !strings.Contains(err.Error(), "newer than this binary") {
				t.Fatalf("open of a newer schema: %v", err)
			}
		})
	}
}

func TestPurgeReservations(t *testing.T) {
	ctx := context.Background()
	key := cache.Key{Org: "o", Project: "p", Domain: "d", Key: "k"}
	dir := t.TempDir()
	st := sqliteStore(t, dir)
	if _, err := st.GetOrExtendReservation(ctx, key, "a", time.Second, t0); err != nil { // expires t0+3s
		t.Fatal(err)
	}
	for _, tc := range []struct {
		before time.Time
		want   int64
	}{{t0.Add(3 * time.Second), 0}, {t0.Add(3*time.Second + 1), 1}, {t0.Add(time.Hour), 0}} {
		n, err := st.PurgeReservations(ctx, tc.before)
		if err != nil || n != tc.want {
			t.Fatalf("purge before %s: %d %v, want %d", tc.before, n, err, tc.want)
		}
	}

	t.Run("the server purges long-expired reservations on its own", func(t *testing.T) {
		clock := cachesvctest.NewClock(t0)
		srv := cachesvc.NewServer(st, cachesvc.ServerOptions{Listen: "127.0.0.1:0", Now: clock.Now, PurgeInterval: 10 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := srv.Start(ctx); err != nil {
			t.Fatal(err)
		}
		c := cache.NewClient(srv.URL(), nil)
		if _, err := c.GetOrExtendReservation(ctx, key, "a", time.Second); err != nil {
			t.Fatal(err)
		}
		raw := rawDB(t, "sqlite", filepath.Join(dir, cachesvc.SQLiteFile))
		count := func() int {
			var n int
			if err := raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM cache_reservations`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		time.Sleep(100 * time.Millisecond)
		if n := count(); n != 1 {
			t.Fatalf("a live reservation was purged: %d rows", n)
		}
		clock.Advance(2 * time.Hour)
		deadline := time.Now().Add(10 * time.Second)
		for count() != 0 {
			if time.Now().After(deadline) {
				t.Fatal("the expired reservation was not purged")
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if err := srv.Wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStoreReservationRace races owners on the store itself, without HTTP in
// between, which keeps the racers close together.
func TestStoreReservationRace(t *testing.T) {
	ctx := context.Background()
	stores := map[string]func(t *testing.T) cachesvc.Store{
		"sqlite": func(t *testing.T) cachesvc.Store { return sqliteStore(t, t.TempDir()) },
		"postgres": func(t *testing.T) cachesvc.Store {
			return cachesvctest.OpenPostgres(t, cachesvctest.StartPostgres(t))
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			const rounds, racers = 40, 16
			for round := range rounds {
				key := cache.Key{Org: "o", Project: "p", Domain: "d", Key: fmt.Sprintf("round-%d", round)}
				// Odd rounds race over an expired reservation, even ones over a free key.
				if round%2 == 1 {
					if _, err := st.GetOrExtendReservation(ctx, key, "gone", time.Second, t0.Add(-time.Hour)); err != nil {
						t.Fatal(err)
					}
				}
				got := make([]cache.Reservation, racers)
				errs := make([]error, racers)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range racers {
					wg.Go(func() {
						<-start
						got[i], errs[i] = st.GetOrExtendReservation(ctx, key, fmt.Sprint("owner-", i), time.Second, t0)
					})
				}
				close(start)
				wg.Wait()
				winners := 0
				for i := range racers {
					if errs[i] != nil {
						t.Fatalf("round %d racer %d: %v", round, i, errs[i])
					}
					if got[i].Owner == fmt.Sprint("owner-", i) {
						winners++
					}
					if got[i].Owner != got[0].Owner {
						t.Fatalf("round %d: racers see different holders: %s and %s", round, got[0].Owner, got[i].Owner)
					}
				}
				if winners != 1 {
					t.Fatalf("round %d: %d winners, want 1", round, winners)
				}
			}
		})
	}
}
