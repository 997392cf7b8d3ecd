// Package cachesvctest runs a real cache service (SQLite in a temp dir, or a
// throwaway PostgreSQL) on loopback for tests, with a clock tests can move.
package cachesvctest

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/taskaction/executor/pkg/cachesvc"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
)

// Clock is a manual clock for the service: reservations expire and entries
// age only when the test says so.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now is the current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Options of Start.
type Options struct {
	// Store, if set, is served instead of a fresh SQLite store; the caller closes it.
	Store cachesvc.Store
	// MaxAge of entries; 0: none.
	MaxAge time.Duration
	// Clock, if set, is the service's clock; else real time.
	Clock *Clock
	// TracerProvider, if set, traces the service (ServerOptions.TracerProvider).
	TracerProvider trace.TracerProvider
}

// Instance is a running cache service.
type Instance struct {
	// URL is the base URL for cache.NewClient.
	URL    string
	Server *cachesvc.Server
	Store  cachesvc.Store
	Clock  *Clock
}

// Start serves a real cache service on 127.0.0.1 until the test ends.
func Start(t testing.TB, opts Options) *Instance {
	t.Helper()
	st := opts.Store
	if st == nil {
		var err error
		st, err = cachesvc.OpenSQLite(context.Background(), t.TempDir())
		if err != nil {
			t.Fatalf("open sqlite cache store: %v", err)
		}
		t.Cleanup(func() { _ = st.Close() })
	}
	// The default shutdown timeout (10s), not less: net/http's graceful
	// shutdown waits for a connection that has not sent its first request
	// for up to 5s (6 with its whole-second clock), so a client that opened
	// one just before the end made a 5s timeout fail now and then.
	so := cachesvc.ServerOptions{Listen: "127.0.0.1:0", MaxAge: opts.MaxAge, TracerProvider: opts.TracerProvider}
	if opts.Clock != nil {
		so.Now = opts.Clock.Now
	}
	srv := cachesvc.NewServer(st, so)
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx); err != nil {
		cancel()
		t.Fatalf("start cache service: %v", err)
	}
	// Registered after the store's cleanup, so it runs first: stop serving, then close.
	t.Cleanup(func() {
		cancel()
		if err := srv.Wait(); err != nil {
			t.Errorf("cache service: %v", err)
		}
	})
	return &Instance{URL: srv.URL(), Server: srv, Store: st, Clock: opts.Clock}
}

// StartPostgres runs a throwaway PostgreSQL server for the test and returns
// its DSN; it skips without the binaries unless CI=true (see eventsvctest).
func StartPostgres(t testing.TB) string {
	t.Helper()
	return eventsvctest.StartPostgres(t)
}

// OpenPostgres opens a cache store on dsn, closed when the test ends.
func OpenPostgres(t testing.TB, dsn string) cachesvc.Store {
	t.Helper()
	st, err := cachesvc.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open postgres cache store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
