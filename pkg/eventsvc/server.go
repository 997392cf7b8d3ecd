package eventsvc

import (
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskaction/executor/gen/executor/events/v2/eventsv2connect"
	"github.com/taskaction/executor/gen/flyteidl2/workflow/workflowconnect"
	"github.com/taskaction/executor/internal/svcbase"
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
	// TracerProvider, when it makes spans, continues the callers' traces
	// with a server span per call; nil: none.
	TracerProvider trace.TracerProvider
}

// Server serves the events service (see svcbase for the transport).
type Server struct {
	*svcbase.Server
	svc *Service
}

// maxRequestBytes bounds a Record call: a full batch of large events.
const maxRequestBytes = 64 << 20

// NewServer serves store. The caller keeps ownership of store and closes it after Run.
func NewServer(store Store, opts ServerOptions) *Server {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	svc := NewService(store, opts.Log)
	s := &Server{svc: svc}
	s.Server = svcbase.New(svcbase.Options{
		Name: "events service", Listen: opts.Listen, Log: opts.Log, ShutdownTimeout: opts.ShutdownTimeout,
		Ping: store.Ping, TracerProvider: opts.TracerProvider,
		Mount: func(mux *http.ServeMux) {
			mux.Handle(workflowconnect.NewEventsProxyServiceHandler(svc, s.HandlerOptions(maxRequestBytes)...))
			mux.Handle(eventsv2connect.NewEventsQueryServiceHandler(svc, s.HandlerOptions(1<<20)...))
			mux.Handle("GET /metrics", svc.metrics.handler())
		},
		// Shutdown waits for handlers: end the Watch streams first.
		BeforeShutdown: svc.endWatches,
	})
	return s
}
