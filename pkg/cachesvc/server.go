package cachesvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/go-logr/logr"

	"github.com/taskaction/executor/gen/executor/cache/v1/cachev1connect"
)

// DefaultListen is where the service listens unless told otherwise; the
// executor's default cacheServiceURL points here.
const DefaultListen = ":8094"

// purgeAfter: reservations expired this long ago are deleted. Only keys no
// one asks for again leave such rows; any caller takes an expired one over.
const purgeAfter = time.Hour

// ServerOptions configure a Server.
type ServerOptions struct {
	// Listen is the address to listen on; default DefaultListen. ":0" picks a free port.
	Listen string
	Log    logr.Logger
	// ShutdownTimeout bounds the graceful shutdown when Run's context ends. Default 10s.
	ShutdownTimeout time.Duration
	// MaxAge, if positive, makes older entries count as missing.
	MaxAge time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// PurgeInterval is how often long-expired reservations are deleted.
	// Default 10m; negative disables it.
	PurgeInterval time.Duration
}

// Server serves the cache service (Connect, gRPC and gRPC-Web on one
// handler, HTTP/1.1 and cleartext HTTP/2) and /healthz.
type Server struct {
	store Store
	opts  ServerOptions
	svc   *Service

	mu   sync.Mutex
	ln   net.Listener
	done chan struct{} // closed when the Run that Start began returns
	err  error
}

// NewServer serves store. The caller keeps ownership of store and closes it after Run.
func NewServer(store Store, opts ServerOptions) *Server {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PurgeInterval == 0 {
		opts.PurgeInterval = 10 * time.Minute
	}
	return &Server{store: store, opts: opts,
		svc: NewService(store, ServiceOptions{MaxAge: opts.MaxAge, Now: opts.Now, Log: opts.Log})}
}

// Handler is the service's HTTP handler, for embedding or httptest.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	// Requests are a key and a URI: a small limit costs nothing.
	path, h := cachev1connect.NewCacheServiceHandler(s.svc, connect.WithReadMaxBytes(1<<20))
	mux.Handle(path, h)
	health := func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.store.Ping(ctx); err != nil {
			http.Error(w, "store unavailable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
	mux.HandleFunc("GET /healthz", health)
	mux.HandleFunc("GET /readyz", health)
	return mux
}

// Listen binds the listen address; Run calls it when needed. After it, Addr
// is the bound address (useful with ":0").
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("cache service: listen on %s: %w", s.opts.Listen, err)
	}
	s.ln = ln
	return nil
}

// Addr is the bound address, or the configured one before Listen.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.opts.Listen
}

// URL is the base URL clients use, e.g. http://127.0.0.1:8094.
func (s *Server) URL() string {
	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil {
		return "http://" + s.Addr()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// Start binds the address and serves in the background until ctx is done;
// Wait returns the outcome. For in-process use, e.g. by `executor local`:
// once Start returns, URL answers.
func (s *Server) Start(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.done != nil {
		s.mu.Unlock()
		return errors.New("cache service: already started")
	}
	s.done = make(chan struct{})
	s.mu.Unlock()
	go func() {
		err := s.Run(ctx)
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.done)
	}()
	return nil
}

// Wait blocks until the server Start began has stopped and returns Run's error.
func (s *Server) Wait() error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return errors.New("cache service: not started")
	}
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Run serves until ctx is done, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true) // gRPC clients without TLS
	srv := &http.Server{
		Handler:           s.Handler(),
		Protocols:         protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	s.opts.Log.Info("cache service listening", "address", s.Addr(), "maxAge", s.opts.MaxAge.String())
	var purge <-chan time.Time
	if s.opts.PurgeInterval > 0 {
		t := time.NewTicker(s.opts.PurgeInterval)
		defer t.Stop()
		purge = t.C
	}
	for running := true; running; {
		select {
		case err := <-errc:
			return fmt.Errorf("cache service: %w", err)
		case <-ctx.Done():
			running = false
		case <-purge:
			s.purge(ctx)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("cache service: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("cache service: %w", err)
	}
	return nil
}

func (s *Server) purge(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := s.store.PurgeReservations(ctx, s.opts.Now().Add(-purgeAfter))
	if err != nil {
		s.opts.Log.Error(err, "purging expired cache reservations failed")
		return
	}
	if n > 0 {
		s.opts.Log.V(1).Info("purged expired cache reservations", "count", n)
	}
}
