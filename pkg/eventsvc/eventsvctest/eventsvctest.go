// Package eventsvctest runs a real events service (SQLite in a temp dir, or a
// throwaway PostgreSQL) on loopback for tests, with switches for outages and
// failures at the HTTP layer.
package eventsvctest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/pkg/eventsvc"
)

// Options of Start.
type Options struct {
	// Store, if set, is served (and closed at cleanup) instead of a fresh SQLite store.
	Store eventsvc.Store
	// RecordDelay slows every Record call down, e.g. to make batches pile up.
	RecordDelay time.Duration
	// TracerProvider, if set, traces the service (ServerOptions.TracerProvider).
	TracerProvider trace.TracerProvider
}

// Instance is a running events service.
type Instance struct {
	// URL is the base URL for events.NewClient; it stays the same across Stop and Resume.
	URL     string
	Store   *CountingStore
	DataDir string

	t       testing.TB
	addr    string
	handler http.Handler

	mu  sync.Mutex
	srv *http.Server

	failNext    atomic.Int64 // Record requests still to fail with 503
	failAll     atomic.Bool
	recordDelay time.Duration
	inFlight    atomic.Int64
	maxInFlight atomic.Int64
	gate        atomic.Pointer[chan struct{}]
}

// Start serves a real events service on 127.0.0.1 until the test ends.
func Start(t testing.TB, opts Options) *Instance {
	t.Helper()
	inst := &Instance{t: t, recordDelay: opts.RecordDelay}
	st := opts.Store
	if st == nil {
		inst.DataDir = t.TempDir()
		var err error
		st, err = eventsvc.OpenSQLite(context.Background(), inst.DataDir)
		if err != nil {
			t.Fatalf("open sqlite store: %v", err)
		}
	}
	inst.Store = &CountingStore{Store: st}
	server := eventsvc.NewServer(inst.Store, eventsvc.ServerOptions{Listen: "127.0.0.1:0", TracerProvider: opts.TracerProvider})
	inst.handler = inst.faults(server.Handler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	inst.addr = ln.Addr().String()
	inst.URL = "http://" + inst.addr
	inst.serve(ln)
	t.Cleanup(func() {
		inst.Stop()
		_ = inst.Store.Close()
	})
	return inst
}

func (i *Instance) serve(ln net.Listener) {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: i.handler, Protocols: protocols, ReadHeaderTimeout: 5 * time.Second}
	i.mu.Lock()
	i.srv = srv
	i.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Stop takes the service off the network (connections are refused) until Resume.
func (i *Instance) Stop() {
	i.mu.Lock()
	srv := i.srv
	i.srv = nil
	i.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Resume serves again on the same address after Stop.
func (i *Instance) Resume() {
	i.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the old socket may linger for a moment
		if ln, err = net.Listen("tcp", i.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		i.t.Fatalf("resume on %s: %v", i.addr, err)
	}
	i.serve(ln)
}

// FailNext makes the next n Record requests fail with HTTP 503 (Unavailable).
func (i *Instance) FailNext(n int) { i.failNext.Store(int64(n)) }

// SetFailing makes every Record request fail with HTTP 503 while on.
func (i *Instance) SetFailing(on bool) { i.failAll.Store(on) }

// Hold makes Record requests wait until the returned func is called.
func (i *Instance) Hold() (release func()) {
	c := make(chan struct{})
	i.gate.Store(&c)
	var once sync.Once
	return func() { once.Do(func() { i.gate.Store(nil); close(c) }) }
}

// MaxConcurrentRecords is the most Record requests the service handled at once.
func (i *Instance) MaxConcurrentRecords() int { return int(i.maxInFlight.Load()) }

func (i *Instance) faults(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/Record") {
			next.ServeHTTP(w, r)
			return
		}
		n := i.inFlight.Add(1)
		defer i.inFlight.Add(-1)
		for {
			m := i.maxInFlight.Load()
			if n <= m || i.maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		if g := i.gate.Load(); g != nil {
			select {
			case <-*g:
			case <-r.Context().Done():
				return
			}
		}
		if i.recordDelay > 0 {
			time.Sleep(i.recordDelay)
		}
		if i.failAll.Load() || i.failNext.Add(-1) >= 0 {
			http.Error(w, "injected outage", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// CountingStore counts what reaches the store.
type CountingStore struct {
	eventsvc.Store
	mu         sync.Mutex
	batchSizes []int
	stored     int
	duplicates int
}

// Record counts and stores.
func (c *CountingStore) Record(ctx context.Context, evs []*workflow.ActionEvent) (int, int, error) {
	s, d, err := c.Store.Record(ctx, evs)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batchSizes = append(c.batchSizes, len(evs))
	if err == nil {
		c.stored += s
		c.duplicates += d
	}
	return s, d, err
}

// BatchSizes are the sizes of the batches stored so far, in order.
func (c *CountingStore) BatchSizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.batchSizes...)
}

// Counts are the events stored and skipped as duplicates so far.
func (c *CountingStore) Counts() (stored, duplicates int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stored, c.duplicates
}

// All reads every stored event of run.
func (c *CountingStore) All(ctx context.Context, run string) ([]eventsvc.StoredEvent, error) {
	var out []eventsvc.StoredEvent
	var after int64
	for {
		got, err := c.List(ctx, eventsvc.Query{Run: run, AfterSeq: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		if len(got) < 1000 {
			return out, nil
		}
		after = got[len(got)-1].Seq
	}
}

var errNoPostgres = errors.New("no PostgreSQL binaries")
