package cachesvc

import (
	"context"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskaction/executor/gen/flyteidl2/cacheservice/v2/cacheservicev2connect"
	"github.com/taskaction/executor/internal/svcbase"
)

// DefaultListen is where the service listens unless told otherwise; the
// executor's default cacheServiceURL points here.
const DefaultListen = ":8094"

// purgeAfter: reservations expired this long ago are deleted. Only keys no
// one asks for again leave such rows; any caller takes an expired one over.
const purgeAfter = time.Hour

// maxRequestBytes bounds a request: a key, a URI and a little metadata.
const maxRequestBytes = 1 << 20

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
	// TracerProvider, when it makes spans, continues the callers' traces
	// with a server span per call; nil: none.
	TracerProvider trace.TracerProvider
}

// Server serves the cache service (see svcbase for the transport).
type Server struct {
	*svcbase.Server
	store Store
	opts  ServerOptions
}

// NewServer serves store. The caller keeps ownership of store and closes it after Run.
func NewServer(store Store, opts ServerOptions) *Server {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PurgeInterval == 0 {
		opts.PurgeInterval = 10 * time.Minute
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	s := &Server{store: store, opts: opts}
	svc := NewService(store, ServiceOptions{MaxAge: opts.MaxAge, Now: opts.Now, Log: opts.Log})
	s.Server = svcbase.New(svcbase.Options{
		Name: "cache service", Listen: opts.Listen, Log: opts.Log, ShutdownTimeout: opts.ShutdownTimeout,
		Ping: store.Ping, TracerProvider: opts.TracerProvider,
		Mount: func(mux *http.ServeMux) {
			mux.Handle(cacheservicev2connect.NewCacheServiceHandler(svc, s.HandlerOptions(maxRequestBytes)...))
		},
		Every: opts.PurgeInterval, Tick: s.purge,
	})
	return s
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
