package cachesvc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/go-logr/logr"

	cachev1 "github.com/taskaction/executor/gen/executor/cache/v1"
	"github.com/taskaction/executor/gen/executor/cache/v1/cachev1connect"
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
	// MaxAge, if positive, makes entries older than it count as missing: Get
	// answers NOT_FOUND and Put replaces them.
	MaxAge time.Duration
	// Now is the clock; default time.Now. Tests move it instead of sleeping.
	Now func() time.Time
	Log logr.Logger
}

// Service implements CacheService over a Store.
type Service struct {
	store Store
	opts  ServiceOptions
}

var _ cachev1connect.CacheServiceHandler = (*Service)(nil)

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

// notBefore is the creation time from which an entry is live.
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

func (s *Service) key(k *cachev1.Key) (cache.Key, error) {
	if k == nil {
		return cache.Key{}, invalid(errors.New("key is required"))
	}
	key := cache.KeyFromProto(k)
	if err := key.Validate(); err != nil {
		return cache.Key{}, invalid(err)
	}
	return key, nil
}

// Get returns a live entry or NOT_FOUND.
func (s *Service) Get(ctx context.Context, req *connect.Request[cachev1.GetRequest]) (*connect.Response[cachev1.GetResponse], error) {
	key, err := s.key(req.Msg.GetKey())
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
	return connect.NewResponse(&cachev1.GetResponse{Entry: cache.EntryToProto(e)}), nil
}

// Put stores an entry, or answers ALREADY_EXISTS when a live one is kept.
func (s *Service) Put(ctx context.Context, req *connect.Request[cachev1.PutRequest]) (*connect.Response[cachev1.PutResponse], error) {
	key, err := s.key(req.Msg.GetKey())
	if err != nil {
		return nil, err
	}
	if req.Msg.GetEntry() == nil {
		return nil, invalid(errors.New("entry is required"))
	}
	e := cache.EntryFromProto(req.Msg.GetEntry())
	if err := e.Validate(); err != nil {
		return nil, invalid(err)
	}
	now := s.opts.Now()
	e.CreatedAt = now
	stored, err := s.store.Put(ctx, key, e, req.Msg.GetOverwrite(), s.notBefore(now))
	if err != nil {
		return nil, s.unavailable(err, "cache put failed", "key", key.String())
	}
	if !stored {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("a live cache entry for %s exists and overwrite is false", key))
	}
	return connect.NewResponse(&cachev1.PutResponse{Entry: cache.EntryToProto(e)}), nil
}

// Delete removes an entry; a missing one is fine.
func (s *Service) Delete(ctx context.Context, req *connect.Request[cachev1.DeleteRequest]) (*connect.Response[cachev1.DeleteResponse], error) {
	key, err := s.key(req.Msg.GetKey())
	if err != nil {
		return nil, err
	}
	if err := s.store.Delete(ctx, key); err != nil {
		return nil, s.unavailable(err, "cache delete failed", "key", key.String())
	}
	return connect.NewResponse(&cachev1.DeleteResponse{}), nil
}

// GetOrExtendReservation grants, extends or reports the holder.
func (s *Service) GetOrExtendReservation(ctx context.Context, req *connect.Request[cachev1.GetOrExtendReservationRequest]) (*connect.Response[cachev1.GetOrExtendReservationResponse], error) {
	key, err := s.key(req.Msg.GetKey())
	if err != nil {
		return nil, err
	}
	owner := req.Msg.GetOwner()
	if err := cache.ValidateOwner(owner); err != nil {
		return nil, invalid(err)
	}
	var hb time.Duration
	if d := req.Msg.GetHeartbeatInterval(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, invalid(fmt.Errorf("heartbeat_interval: %w", err))
		}
		if hb = d.AsDuration(); hb < 0 {
			return nil, invalid(fmt.Errorf("heartbeat_interval %s is negative", hb))
		}
	}
	r, err := s.store.GetOrExtendReservation(ctx, key, owner, ClampHeartbeat(hb), s.opts.Now())
	if err != nil {
		return nil, s.unavailable(err, "cache reservation failed", "key", key.String(), "owner", owner)
	}
	return connect.NewResponse(&cachev1.GetOrExtendReservationResponse{Reservation: cache.ReservationToProto(key, r)}), nil
}

// ReleaseReservation frees owner's reservation; anything else is a no-op.
func (s *Service) ReleaseReservation(ctx context.Context, req *connect.Request[cachev1.ReleaseReservationRequest]) (*connect.Response[cachev1.ReleaseReservationResponse], error) {
	key, err := s.key(req.Msg.GetKey())
	if err != nil {
		return nil, err
	}
	owner := req.Msg.GetOwner()
	if err := cache.ValidateOwner(owner); err != nil {
		return nil, invalid(err)
	}
	if err := s.store.ReleaseReservation(ctx, key, owner); err != nil {
		return nil, s.unavailable(err, "cache release failed", "key", key.String(), "owner", owner)
	}
	return connect.NewResponse(&cachev1.ReleaseReservationResponse{}), nil
}
