// Package cache is the executor's side of the task-output cache: the key,
// entry and reservation types, their validation (shared with the service in
// pkg/cachesvc) and a connect client of the cache service.
package cache

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	cachev1 "github.com/taskaction/executor/gen/executor/cache/v1"
)

// Size limits. They keep the five key columns inside PostgreSQL's B-tree
// entry limit (about 2.7 kB), so a long key fails as INVALID_ARGUMENT rather
// than as a database error.
const (
	MaxKeyPartBytes    = 256  // project, domain, task name, task version
	MaxCacheKeyBytes   = 1024 // spec.cacheKey: usually a hash, but callers may pass more
	MaxOwnerBytes      = 512  // <namespace>/<name> is at most 317
	MaxOutputURIBytes  = 4096
	MaxSourcePartBytes = 512 // each of the source's project, domain, run, action
)

// ErrInvalid is wrapped by every validation error of this package.
var ErrInvalid = errors.New("invalid cache request")

// Key is the cache identity of a task's outputs: (project, domain, task name,
// task version, spec.cacheKey). Every part is required.
type Key struct {
	Project, Domain, TaskName, TaskVersion, CacheKey string
}

func (k Key) String() string {
	return fmt.Sprintf("%s/%s/%s@%s/%q", k.Project, k.Domain, k.TaskName, k.TaskVersion, k.CacheKey)
}

// Validate names the first missing or malformed part, using the proto field
// names so the client and the service report the same thing.
func (k Key) Validate() error {
	parts := []struct {
		name, v string
		max     int
	}{
		{"key.project", k.Project, MaxKeyPartBytes},
		{"key.domain", k.Domain, MaxKeyPartBytes},
		{"key.task_name", k.TaskName, MaxKeyPartBytes},
		{"key.task_version", k.TaskVersion, MaxKeyPartBytes},
		{"key.cache_key", k.CacheKey, MaxCacheKeyBytes},
	}
	for _, p := range parts {
		if p.v == "" {
			return fmt.Errorf("%w: %s is required", ErrInvalid, p.name)
		}
		if err := checkString(p.name, p.v, p.max); err != nil {
			return err
		}
	}
	return nil
}

// checkString rejects what the stores cannot keep faithfully: PostgreSQL TEXT
// refuses NUL and invalid UTF-8, and proto3 strings must be UTF-8.
func checkString(name, v string, max int) error {
	switch {
	case len(v) > max:
		return fmt.Errorf("%w: %s is %d bytes, at most %d are allowed", ErrInvalid, name, len(v), max)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, name)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalid, name)
	}
	return nil
}

// ValidateOwner checks a reservation owner.
func ValidateOwner(owner string) error {
	if owner == "" {
		return fmt.Errorf("%w: owner is required", ErrInvalid)
	}
	return checkString("owner", owner, MaxOwnerBytes)
}

// Source is the attempt that produced an entry's outputs.
type Source struct {
	Project, Domain, Run, Action string
	Attempt                      uint32
}

// Entry is a cached output.
type Entry struct {
	// OutputURI is where the producing attempt wrote its outputs. Required.
	OutputURI string
	Source    Source
	// CreatedAt is set by the service when it stores the entry; Put ignores it.
	CreatedAt time.Time
}

// Validate checks what Put needs: an output URI, and sizes the stores accept.
func (e Entry) Validate() error {
	if e.OutputURI == "" {
		return fmt.Errorf("%w: entry.output_uri is required", ErrInvalid)
	}
	if err := checkString("entry.output_uri", e.OutputURI, MaxOutputURIBytes); err != nil {
		return err
	}
	for _, p := range []struct{ name, v string }{
		{"entry.source.project", e.Source.Project}, {"entry.source.domain", e.Source.Domain},
		{"entry.source.run", e.Source.Run}, {"entry.source.action", e.Source.Action},
	} {
		if err := checkString(p.name, p.v, MaxSourcePartBytes); err != nil {
			return err
		}
	}
	return nil
}

// Reservation is the right to compute a key's outputs until ExpiresAt.
type Reservation struct {
	Owner     string
	ExpiresAt time.Time
	// HeartbeatInterval is the interval the service applied after clamping.
	HeartbeatInterval time.Duration
}

// HeldBy says whether owner holds the reservation.
func (r Reservation) HeldBy(owner string) bool { return r.Owner == owner }

// KeyToProto converts k.
func KeyToProto(k Key) *cachev1.Key {
	return &cachev1.Key{Project: k.Project, Domain: k.Domain, TaskName: k.TaskName, TaskVersion: k.TaskVersion, CacheKey: k.CacheKey}
}

// KeyFromProto converts k; nil gives the zero Key, which fails Validate.
func KeyFromProto(k *cachev1.Key) Key {
	return Key{Project: k.GetProject(), Domain: k.GetDomain(), TaskName: k.GetTaskName(), TaskVersion: k.GetTaskVersion(), CacheKey: k.GetCacheKey()}
}

// EntryToProto converts e; a zero CreatedAt is left unset.
func EntryToProto(e Entry) *cachev1.Entry {
	pe := &cachev1.Entry{
		OutputUri: e.OutputURI,
		Source: &cachev1.Source{Project: e.Source.Project, Domain: e.Source.Domain, Run: e.Source.Run,
			Action: e.Source.Action, Attempt: e.Source.Attempt},
	}
	if !e.CreatedAt.IsZero() {
		pe.CreatedAt = timestamppb.New(e.CreatedAt)
	}
	return pe
}

// EntryFromProto converts e.
func EntryFromProto(e *cachev1.Entry) Entry {
	s := e.GetSource()
	out := Entry{
		OutputURI: e.GetOutputUri(),
		Source:    Source{Project: s.GetProject(), Domain: s.GetDomain(), Run: s.GetRun(), Action: s.GetAction(), Attempt: s.GetAttempt()},
	}
	if e.GetCreatedAt() != nil {
		out.CreatedAt = e.GetCreatedAt().AsTime()
	}
	return out
}

// ReservationToProto converts r of key k.
func ReservationToProto(k Key, r Reservation) *cachev1.Reservation {
	return &cachev1.Reservation{Key: KeyToProto(k), Owner: r.Owner, ExpiresAt: timestamppb.New(r.ExpiresAt),
		HeartbeatInterval: durationpb.New(r.HeartbeatInterval)}
}

// ReservationFromProto converts r.
func ReservationFromProto(r *cachev1.Reservation) Reservation {
	out := Reservation{Owner: r.GetOwner()}
	if r.GetExpiresAt() != nil {
		out.ExpiresAt = r.GetExpiresAt().AsTime()
	}
	if r.GetHeartbeatInterval() != nil {
		out.HeartbeatInterval = r.GetHeartbeatInterval().AsDuration()
	}
	return out
}
