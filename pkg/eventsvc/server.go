package eventsvc

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

	"github.com/taskaction/executor/gen/executor/events/v1/eventsv1connect"
)

// DefaultListen is where the service listens unless told otherwise; the
// executor's default eventsServiceURL points here.
const DefaultListen = ":8090"

// ServerOptions configure a Server.
type ServerOptions struct {
	// Listen is the address to listen on; default DefaultListen. ":0" picks a free port.
	Listen string
	Log    logr.Logger
	// ShutdownTimeout bounds the graceful shutdown when Run's context ends. Default 10s.
	ShutdownTimeout time.Duration
}

// Server serves the events service (Connect, gRPC and gRPC-Web on one
// handler, HTTP/1.1 and cleartext HTTP/2) and /healthz.
type Server struct {
	store Store
	opts  ServerOptions
	svc   *Service

	mu sync.Mutex
	ln net.Listener
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
	return &Server{store: store, opts: opts, svc: NewService(store, opts.Log)}
}

// Handler is the service's HTTP handler, for embedding or httptest.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	path, h := eventsv1connect.NewEventsServiceHandler(s.svc, connect.WithReadMaxBytes(64<<20))
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
		return fmt.Errorf("events service: listen on %s: %w", s.opts.Listen, err)
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

// URL is the base URL clients use, e.g. http://127.0.0.1:8090.
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
	s.opts.Log.Info("events service listening", "address", s.Addr())
	select {
	case err := <-errc:
		return fmt.Errorf("events service: %w", err)
	case <-ctx.Done():
	}
	// Shutdown waits for handlers: end the Watch streams, give unary calls ShutdownTimeout.
	s.svc.endWatches()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("events service: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("events service: %w", err)
	}
	return nil
}
