// Package svcbase is the HTTP lifecycle the embedded services share: one
// handler serving Connect, gRPC and gRPC-Web over HTTP/1.1 and cleartext
// HTTP/2, health endpoints backed by the store, graceful shutdown, and
// in-process Start/Wait.
package svcbase

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
	"go.opentelemetry.io/otel/trace"

	"github.com/taskaction/executor/pkg/tracing"
)

// Options configure a Server.
type Options struct {
	// Name is the service's name in logs and errors, e.g. "events service".
	Name string
	// Listen is the address to listen on. ":0" picks a free port.
	Listen string
	Log    logr.Logger
	// ShutdownTimeout bounds the graceful shutdown when Run's context ends. Default 10s.
	ShutdownTimeout time.Duration
	// Ping backs /healthz and /readyz: the service is healthy while its store answers.
	Ping func(ctx context.Context) error
	// Mount registers the service's RPC handlers on mux.
	Mount func(mux *http.ServeMux)
	// BeforeShutdown runs when Run's context ends, before the HTTP server
	// waits for its handlers: it ends streams that would otherwise hold it.
	BeforeShutdown func()
	// Every, if set, runs Tick every interval while serving (housekeeping).
	Every time.Duration
	Tick  func(ctx context.Context)
	// TracerProvider, when it makes spans, gives each RPC a server span
	// continuing the caller's trace (Server.HandlerOptions); nil: none.
	TracerProvider trace.TracerProvider
}

// compressMinBytes is the smallest response worth compressing when the client
// accepts gzip. connect compresses every response by default, and most of ours
// (a Record's or a reservation's acknowledgement) are a few bytes, for which
// setting up a gzip writer costs more CPU than the bytes it would save.
const compressMinBytes = 1 << 10

// HandlerOptions are the connect handler options of a service whose
// requests are at most maxBytes.
func HandlerOptions(maxBytes int) []connect.HandlerOption {
	return []connect.HandlerOption{connect.WithReadMaxBytes(maxBytes), connect.WithCompressMinBytes(compressMinBytes)}
}

// HandlerOptions are HandlerOptions(maxBytes) with, when the server traces,
// the interceptor that continues the caller's trace. Mount uses them.
func (s *Server) HandlerOptions(maxBytes int) []connect.HandlerOption {
	return append(HandlerOptions(maxBytes), tracing.HandlerOptions(s.opts.TracerProvider)...)
}

// Server serves one service.
type Server struct {
	opts Options

	mu   sync.Mutex
	ln   net.Listener
	done chan struct{} // closed when the Run that Start began returns
	err  error
}

// New is a server; nothing listens until Listen, Run or Start.
func New(opts Options) *Server {
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Server{opts: opts}
}

// Handler is the service's HTTP handler, for embedding or httptest.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	if s.opts.Mount != nil {
		s.opts.Mount(mux)
	}
	health := func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if s.opts.Ping != nil {
			if err := s.opts.Ping(ctx); err != nil {
				http.Error(w, "store unavailable: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
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
		return fmt.Errorf("%s: listen on %s: %w", s.opts.Name, s.opts.Listen, err)
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

// URL is the base URL clients use, e.g. http://127.0.0.1:8090; an
// unspecified host becomes the loopback address.
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
// Wait returns the outcome. Once Start returns, URL answers.
func (s *Server) Start(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.done != nil {
		s.mu.Unlock()
		return fmt.Errorf("%s: already started", s.opts.Name)
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
		return fmt.Errorf("%s: not started", s.opts.Name)
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
	s.opts.Log.Info(s.opts.Name+" listening", "address", s.Addr())
	var tick <-chan time.Time
	if s.opts.Every > 0 && s.opts.Tick != nil {
		t := time.NewTicker(s.opts.Every)
		defer t.Stop()
		tick = t.C
	}
	for running := true; running; {
		select {
		case err := <-errc:
			return fmt.Errorf("%s: %w", s.opts.Name, err)
		case <-ctx.Done():
			running = false
		case <-tick:
			s.opts.Tick(ctx)
		}
	}
	if s.opts.BeforeShutdown != nil {
		s.opts.BeforeShutdown()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("%s: shutdown: %w", s.opts.Name, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", s.opts.Name, err)
	}
	return nil
}
