package cache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"

	cachepb "github.com/taskaction/executor/gen/flyteidl2/cacheservice"
	cachev2 "github.com/taskaction/executor/gen/flyteidl2/cacheservice/v2"
	"github.com/taskaction/executor/gen/flyteidl2/cacheservice/v2/cacheservicev2connect"
	"github.com/taskaction/executor/pkg/tracing"
)

// DefaultTimeout bounds each call: a slow or absent cache must cost a
// reconcile little, since the task can always just run.
const DefaultTimeout = 2 * time.Second

// Client is what the reconciler needs from the cache service (Flyte's
// flyteidl2.cacheservice.v2.CacheService, or the embedded one). Errors other
// than the documented outcomes mean "the cache could not answer"; callers
// should carry on without the cache rather than fail the task.
type Client interface {
	// Get returns key's entry, or nil and no error when there is none (or it
	// is older than the service's or the client's max age).
	Get(ctx context.Context, key Key) (*Entry, error)
	// Put stores e under key unless a live entry is already there; then it
	// keeps that one and returns alreadyExisted=true with no error, which
	// means the key is populated all the same. CreatedAt of e is ignored.
	Put(ctx context.Context, key Key, e Entry) (alreadyExisted bool, err error)
	// Overwrite stores e under key, replacing any entry.
	Overwrite(ctx context.Context, key Key, e Entry) error
	// Delete removes key's entry; a missing one is not an error (the service
	// answers NOT_FOUND, which the client takes as done).
	Delete(ctx context.Context, key Key) error
	// GetOrExtendReservation asks for key's reservation for owner, who will
	// call again every heartbeat (0: the service default). It returns the
	// reservation in force: owner's when granted or extended, else the
	// holder's; use Reservation.HeldBy(owner).
	GetOrExtendReservation(ctx context.Context, key Key, owner string, heartbeat time.Duration) (Reservation, error)
	// ReleaseReservation frees key's reservation if owner holds it, and
	// otherwise does nothing.
	ReleaseReservation(ctx context.Context, key Key, owner string) error
}

// Option configures NewClient.
type Option func(*client)

// WithTimeout sets the per-call timeout (default DefaultTimeout); zero or
// negative leaves calls bounded only by the caller's context.
func WithTimeout(d time.Duration) Option { return func(c *client) { c.timeout = d } }

// WithMaxAge makes entries last updated longer than d ago count as missing,
// as Flyte's executor does with its cache max age; 0 (the default) keeps them.
func WithMaxAge(d time.Duration) Option { return func(c *client) { c.maxAge = d } }

// WithConnectOptions passes options to the connect client, e.g. connect.WithGRPC().
func WithConnectOptions(opts ...connect.ClientOption) Option {
	return func(c *client) { c.connectOpts = append(c.connectOpts, opts...) }
}

// WithTracerProvider gives each call a span, a child of the caller's, and
// sends its trace context to the service; a provider that makes no spans
// (or nil) adds nothing.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *client) {
		c.tracer = tracing.NewTracer(tp, "executor/cache")
		c.connectOpts = append(c.connectOpts, tracing.ClientOptions(tp)...)
	}
}

// NewClient is a client of the cache service at baseURL (such as
// http://localhost:8094, or Flyte's cache service). A nil httpClient gets DefaultHTTPClient.
func NewClient(baseURL string, httpClient *http.Client, opts ...Option) Client {
	c := &client{timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	if httpClient == nil {
		httpClient = DefaultHTTPClient()
	}
	c.rpc = cacheservicev2connect.NewCacheServiceClient(httpClient, strings.TrimRight(baseURL, "/"), c.connectOpts...)
	return c
}

// DefaultHTTPClient is the HTTP client NewClient uses when given none. Its
// dial timeout is short so an unreachable service fails fast; the per-call
// context bounds the rest.
func DefaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}}
}

type client struct {
	rpc         cacheservicev2connect.CacheServiceClient
	timeout     time.Duration
	maxAge      time.Duration
	connectOpts []connect.ClientOption
	tracer      tracing.Tracer
}

// Attributes of the cache spans.
const (
	attrProject = attribute.Key("cache.project")
	attrDomain  = attribute.Key("cache.domain")
	attrHit     = attribute.Key("cache.hit")
	attrExisted = attribute.Key("cache.already_existed")
	attrOwner   = attribute.Key("cache.reservation.owner")
	attrHolder  = attribute.Key("cache.reservation.holder")
)

// span starts the span of a call on key; the caller ends it with tracing.End.
func (c *client) span(ctx context.Context, name string, key Key) (context.Context, trace.Span) {
	ctx, span := c.tracer.Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(attrProject.String(key.Project), attrDomain.String(key.Domain))
	}
	return ctx, span
}

func (c *client) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}

func (c *client) Get(ctx context.Context, key Key) (e *Entry, err error) {
	ctx, span := c.span(ctx, "cache.Get", key)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attrHit.Bool(e != nil))
		}
		tracing.End(span, err)
	}()
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("cache get: %w", err)
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.rpc.Get(ctx, connect.NewRequest(&cachev2.GetCacheRequest{
		BaseRequest: &cachepb.GetCacheRequest{Key: key.Key}, Identifier: IdentifierToProto(key)}))
	if err != nil {
		if connect.CodeOf(err) == connect.CodeNotFound {
			return nil, nil
		}
		return nil, fmt.Errorf("cache get %s: %w", key, err)
	}
	out := resp.Msg.GetOutput()
	if out.GetOutputUri() == "" {
		// Inline output literals are not something this executor can hand to
		// a task: treat such an entry as a failed lookup, not as a hit.
		return nil, fmt.Errorf("cache get %s: the entry has no output URI", key)
	}
	entry := EntryFromProto(out)
	if c.maxAge > 0 && !entry.LastUpdatedAt.IsZero() && time.Since(entry.LastUpdatedAt) > c.maxAge {
		return nil, nil
	}
	return &entry, nil
}

func (c *client) Put(ctx context.Context, key Key, e Entry) (existed bool, err error) {
	ctx, span := c.span(ctx, "cache.Put", key)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attrExisted.Bool(existed))
		}
		tracing.End(span, err)
	}()
	err = c.put(ctx, key, e, false)
	if connect.CodeOf(err) == connect.CodeAlreadyExists {
		return true, nil
	}
	return false, err
}

func (c *client) Overwrite(ctx context.Context, key Key, e Entry) (err error) {
	ctx, span := c.span(ctx, "cache.Overwrite", key)
	defer func() { tracing.End(span, err) }()
	return c.put(ctx, key, e, true)
}

func (c *client) put(ctx context.Context, key Key, e Entry, overwrite bool) error {
	if err := errors.Join(key.Validate(), e.Validate()); err != nil {
		return fmt.Errorf("cache put: %w", err)
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	e.CreatedAt, e.LastUpdatedAt = time.Time{}, time.Time{}
	_, err := c.rpc.Put(ctx, connect.NewRequest(&cachev2.PutCacheRequest{
		BaseRequest: &cachepb.PutCacheRequest{Key: key.Key, Output: OutputToProto(key, e),
			Overwrite: &cachepb.OverwriteOutput{Overwrite: overwrite}},
		Identifier: IdentifierToProto(key)}))
	if err != nil {
		return fmt.Errorf("cache put %s: %w", key, err)
	}
	return nil
}

func (c *client) Delete(ctx context.Context, key Key) (err error) {
	ctx, span := c.span(ctx, "cache.Delete", key)
	defer func() { tracing.End(span, err) }()
	if err := key.Validate(); err != nil {
		return fmt.Errorf("cache delete: %w", err)
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err = c.rpc.Delete(ctx, connect.NewRequest(&cachev2.DeleteCacheRequest{
		BaseRequest: &cachepb.DeleteCacheRequest{Key: key.Key}, Identifier: IdentifierToProto(key)}))
	if err != nil && connect.CodeOf(err) != connect.CodeNotFound {
		return fmt.Errorf("cache delete %s: %w", key, err)
	}
	return nil
}

func (c *client) GetOrExtendReservation(ctx context.Context, key Key, owner string, heartbeat time.Duration) (res Reservation, err error) {
	ctx, span := c.span(ctx, "cache.GetOrExtendReservation", key)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attrOwner.String(owner), attrHolder.String(res.Owner))
		}
		tracing.End(span, err)
	}()
	err = errors.Join(key.Validate(), ValidateOwner(owner))
	if heartbeat < 0 {
		err = errors.Join(err, fmt.Errorf("%w: heartbeat interval %s is negative", ErrInvalid, heartbeat))
	}
	if err != nil {
		return Reservation{}, fmt.Errorf("cache reservation: %w", err)
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	base := &cachepb.GetOrExtendReservationRequest{Key: key.Key, OwnerId: owner}
	if heartbeat > 0 {
		base.HeartbeatInterval = durationpb.New(heartbeat)
	}
	resp, err := c.rpc.GetOrExtendReservation(ctx, connect.NewRequest(&cachev2.GetOrExtendReservationRequest{
		BaseRequest: base, Identifier: IdentifierToProto(key)}))
	if err != nil {
		return Reservation{}, fmt.Errorf("cache reservation %s for %s: %w", key, owner, err)
	}
	r := resp.Msg.GetReservation()
	if r.GetOwnerId() == "" {
		return Reservation{}, fmt.Errorf("cache reservation %s for %s: the service returned no holder", key, owner)
	}
	return ReservationFromProto(r), nil
}

func (c *client) ReleaseReservation(ctx context.Context, key Key, owner string) (err error) {
	ctx, span := c.span(ctx, "cache.ReleaseReservation", key)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attrOwner.String(owner))
		}
		tracing.End(span, err)
	}()
	if err := errors.Join(key.Validate(), ValidateOwner(owner)); err != nil {
		return fmt.Errorf("cache release: %w", err)
	}
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err = c.rpc.ReleaseReservation(ctx, connect.NewRequest(&cachev2.ReleaseReservationRequest{
		BaseRequest: &cachepb.ReleaseReservationRequest{Key: key.Key, OwnerId: owner}, Identifier: IdentifierToProto(key)}))
	if err != nil {
		return fmt.Errorf("cache release %s for %s: %w", key, owner, err)
	}
	return nil
}
