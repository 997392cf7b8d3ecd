package cachesvc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/go-logr/logr"

	cachepb "github.com/taskaction/executor/gen/flyteidl2/cacheservice"
	cachev2 "github.com/taskaction/executor/gen/flyteidl2/cacheservice/v2"
	"github.com/taskaction/executor/gen/flyteidl2/cacheservice/v2/cacheservicev2connect"
	"github.com/taskaction/executor/pkg/cache"
)

// Heartbeat bounds. The lower one keeps a reservation from expiring between
// two reconciles of a healthy owner; the upper one keeps a crashed owner from
// blocking a key for long (at most 3×MaxHeartbeat).
const (
	DefaultHeartbeat = 10 * time.Second
	MinHeartbeat     = time.Second
	MaxHeartbeat     = time.Minute
)

// ClampHeartbeat applies the default to 0 and the bounds to the rest.
func ClampHeartbeat(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultHeartbeat
	}
	return min(max(d, MinHeartbeat), MaxHeartbeat)
}

// ServiceOptions configure a Service.
type ServiceOptions struct {
	// MaxAge, if positive, makes entries last updated longer ago count as
	// missing: Get answers NOT_FOUND and Put replaces them.
	MaxAge time.Duration
	// Now is the clock; default time.Now. Tests move it instead of sleeping.
	Now func() time.Time
	Log logr.Logger
}

// Service implements Flyte's v2 CacheService over a Store. It behaves as
// Flyte's cache service does: Put without overwrite on a live entry is
// ALREADY_EXISTS, Get and Delete of a missing key NOT_FOUND, and entries are
// output URIs (the outputs stay in blob storage; delete_blob is not acted on).
type Service struct {
	store Store
	opts  ServiceOptions
}

var _ cacheservicev2connect.CacheServiceHandler = (*Service)(nil)

// NewService serves store.
func NewService(store Store, opts ServiceOptions) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Service{store: store, opts: opts}
}

// notBefore is the last-update time from which an entry is live.
func (s *Service) notBefore(now time.Time) time.Time {
	if s.opts.MaxAge <= 0 {
		return time.Time{}
	}
	return now.Add(-s.opts.MaxAge)
}

func invalid(err error) error { return connect.NewError(connect.CodeInvalidArgument, err) }

// unavailable reports a store failure: the database's fault, not the
// caller's, and worth retrying later (callers run the task meanwhile).
func (s *Service) unavailable(err error, msg string, kv ...any) error {
	s.opts.Log.Error(err, msg, kv...)
	return connect.NewError(connect.CodeUnavailable, err)
}

// scopedRequest is what every v2 request has.
type scopedRequest interface {
	GetIdentifier() *cachev2.Identifier
}

// key checks the scope and the base request's key.
func (s *Service) key(req scopedRequest, hasBase bool, baseKey string) (cache.Key, error) {
	if req.GetIdentifier() == nil {
		return cache.Key{}, invalid(errors.New("identifier is required"))
	}
	if !hasBase {
		return cache.Key{}, invalid(errors.New("base_request is required"))
	}
	key := cache.KeyFromProto(req.GetIdentifier(), baseKey)
	if err := key.Validate(); err != nil {
		return cache.Key{}, invalid(err)
	}
	return key, nil
}

// Get returns a live entry or NOT_FOUND.
func (s *Service) Get(ctx context.Context, req *connect.Request[cachev2.GetCacheRequest]) (*connect.Response[cachepb.GetCacheResponse], error) {
	key, err := s.key(req.Msg, req.Msg.GetBaseRequest() != nil, req.Msg.GetBaseRequest().GetKey())
	if err != nil {
		return nil, err
	}
	e, ok, err := s.store.Get(ctx, key, s.notBefore(s.opts.Now()))
	if err != nil {
		return nil, s.unavailable(err, "cache get failed", "key", key.String())
	}
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no live cache entry for %s", key))
	}
	return connect.NewResponse(&cachepb.GetCacheResponse{Output: cache.OutputToProto(key, e)}), nil
}

// Put stores an entry, or answers ALREADY_EXISTS when a live one is kept.
func (s *Service) Put(ctx context.Context, req *connect.Request[cachev2.PutCacheRequest]) (*connect.Response[cachepb.PutCacheResponse], error) {
	base := req.Msg.GetBaseRequest()
	key, err := s.key(req.Msg, base != nil, base.GetKey())
	if err != nil {
		return nil, err
	}
	out := base.GetOutput()
	if out == nil {
		return nil, invalid(errors.New("base_request.output is required"))
	}
	if out.GetOutputLiterals() != nil {
		return nil, invalid(errors.New("base_request.output: inline output literals are not stored; send output_uri"))
	}
	e := cache.EntryFromProto(out)
	if err := e.Validate(); err != nil {
		return nil, invalid(err)
	}
	now := s.opts.Now()
	e.LastUpdatedAt = now
	notBefore := s.notBefore(now)
	if d := base.GetOverwrite().GetMaxAge(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return nil, invalid(fmt.Errorf("base_request.overwrite.max_age %v is not a valid non-negative duration", d))
		}
		// An entry older than the caller's max age may be replaced.
		if t := now.Add(-d.AsDuration()); t.After(notBefore) {
			notBefore = t
		}
	}
	stored, err := s.store.Put(ctx, key, e, base.GetOverwrite().GetOverwrite(), notBefore)
	if err != nil {
		return nil, s.unavailable(err, "cache put failed", "key", key.String())
	}
	if !stored {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("a live cache entry for %s exists and overwrite is false", key))
	}
	return connect.NewResponse(&cachepb.PutCacheResponse{}), nil
}

// Delete removes an entry; NOT_FOUND when there was none.
func (s *Service) Delete(ctx context.Context, req *connect.Request[cachev2.DeleteCacheRequest]) (*connect.Response[cachepb.DeleteCacheResponse], error) {
	key, err := s.key(req.Msg, req.Msg.GetBaseRequest() != nil, req.Msg.GetBaseRequest().GetKey())
	if err != nil {
		return nil, err
	}
	found, err := s.store.Delete(ctx, key)
	if err != nil {
		return nil, s.unavailable(err, "cache delete failed", "key", key.String())
	}
	if !found {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no cache entry for %s", key))
	}
	return connect.NewResponse(&cachepb.DeleteCacheResponse{}), nil
}

// GetOrExtendReservation grants, extends or reports the holder.
func (s *Service) GetOrExtendReservation(ctx context.Context, req *connect.Request[cachev2.GetOrExtendReservationRequest]) (*connect.Response[cachepb.GetOrExtendReservationResponse], error) {
	base := req.Msg.GetBaseRequest()
	key, err := s.key(req.Msg, base != nil, base.GetKey())
	if err != nil {
		return nil, err
	}
	owner := base.GetOwnerId()
	if err := cache.ValidateOwner(owner); err != nil {
		return nil, invalid(err)
	}
	var hb time.Duration
	if d := base.GetHeartbeatInterval(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, invalid(fmt.Errorf("base_request.heartbeat_interval: %w", err))
		}
		if hb = d.AsDuration(); hb < 0 {
			return nil, invalid(fmt.Errorf("base_request.heartbeat_interval %s is negative", hb))
		}
	}
	r, err := s.store.GetOrExtendReservation(ctx, key, owner, ClampHeartbeat(hb), s.opts.Now())
	if err != nil {
		return nil, s.unavailable(err, "cache reservation failed", "key", key.String(), "owner", owner)
	}
	return connect.NewResponse(&cachepb.GetOrExtendReservationResponse{Reservation: cache.ReservationToProto(key, r)}), nil
}

// ReleaseReservation frees owner's reservation; anything else is a no-op.
func (s *Service) ReleaseReservation(ctx context.Context, req *connect.Request[cachev2.ReleaseReservationRequest]) (*connect.Response[cachepb.ReleaseReservationResponse], error) {
	base := req.Msg.GetBaseRequest()
	key, err := s.key(req.Msg, base != nil, base.GetKey())
	if err != nil {
		return nil, err
	}
	owner := base.GetOwnerId()
	if err := cache.ValidateOwner(owner); err != nil {
		return nil, invalid(err)
	}
	if err := s.store.ReleaseReservation(ctx, key, owner); err != nil {
		return nil, s.unavailable(err, "cache release failed", "key", key.String(), "owner", owner)
	}
	return connect.NewResponse(&cachepb.ReleaseReservationResponse{}), nil
}
