// Package cache is the executor's side of Flyte's task cache: the cache key
// (key.go), the entry and reservation types with their validation (shared
// with the embedded service in pkg/cachesvc), and a client of
// flyteidl2.cacheservice.v2.CacheService.
package cache

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	cachepb "github.com/taskaction/executor/gen/flyteidl2/cacheservice"
	cachev2 "github.com/taskaction/executor/gen/flyteidl2/cacheservice/v2"
	"github.com/taskaction/executor/gen/flyteidl2/core"
)

// Size limits. They keep a key's columns inside PostgreSQL's B-tree entry
// limit (about 2.7 kB), so a long key fails as INVALID_ARGUMENT rather than
// as a database error. Flyte's keys are about 150 bytes plus the cache version.
const (
	MaxScopePartBytes  = 256 // org, project, domain
	MaxKeyBytes        = 1536
	MaxOwnerBytes      = 512 // <namespace>/<name> is at most 317
	MaxOutputURIBytes  = 4096
	MaxSourcePartBytes = 512 // each of the source's org, project, domain, run, action
)

// DefaultOrg is the org of the typed template's tasks (the typed template has
// no org): their identity and scope carry it. A Flyte-form template is
// identified and scoped by its identifier's org as it is, empty included, as
// Flyte's executor does.
const DefaultOrg = "local"

// ErrInvalid is wrapped by every validation error of this package.
var ErrInvalid = errors.New("invalid cache request")

// Key is where an entry lives at the cache service: the scope (org, project
// and domain, as Flyte's v2 identifier) and Flyte's cache key (ComputeKey).
// The org may be empty: Flyte's executor sends the task identifier's org as
// it is, and a template without one is scoped by an empty org. The project,
// the domain and the key are required.
type Key struct {
	Org, Project, Domain string
	Key                  string
}

func (k Key) String() string {
	return fmt.Sprintf("%s/%s/%s/%q", k.Org, k.Project, k.Domain, k.Key)
}

// Validate names the first missing or malformed part, using the proto field
// names so the client and the service report the same thing. An empty org is
// valid.
func (k Key) Validate() error {
	parts := []struct {
		name, v  string
		max      int
		optional bool
	}{
		{"identifier.org", k.Org, MaxScopePartBytes, true},
		{"identifier.project", k.Project, MaxScopePartBytes, false},
		{"identifier.domain", k.Domain, MaxScopePartBytes, false},
		{"base_request.key", k.Key, MaxKeyBytes, false},
	}
	for _, p := range parts {
		if p.v == "" && !p.optional {
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
		return fmt.Errorf("%w: base_request.owner_id is required", ErrInvalid)
	}
	return checkString("base_request.owner_id", owner, MaxOwnerBytes)
}

// Source is the attempt that produced an entry's outputs.
type Source struct {
	Org, Project, Domain, Run, Action string
	// Attempt starts at 1.
	Attempt uint32
}

// Entry is a cached output.
type Entry struct {
	// OutputURI is where the producing attempt wrote its outputs
	// (<output prefix>/outputs.pb). Required.
	OutputURI string
	Source    Source
	// Task is the producing task's identifier, version included. Unset, the
	// key's scope stands in for it: Flyte's readers need one.
	Task *core.Identifier
	// CreatedAt is when the key was first stored and LastUpdatedAt when it
	// was last written; the service sets both, Put ignores them.
	CreatedAt, LastUpdatedAt time.Time
}

// Validate checks what Put needs: an output URI, and sizes the stores accept.
func (e Entry) Validate() error {
	if e.OutputURI == "" {
		return fmt.Errorf("%w: base_request.output.output_uri is required", ErrInvalid)
	}
	if err := checkString("base_request.output.output_uri", e.OutputURI, MaxOutputURIBytes); err != nil {
		return err
	}
	for _, p := range []struct{ name, v string }{
		{"source org", e.Source.Org}, {"source project", e.Source.Project}, {"source domain", e.Source.Domain},
		{"source run", e.Source.Run}, {"source action", e.Source.Action},
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

// Keys of Metadata.key_map: Flyte's names, so that Flyte's executor reading
// an entry this executor stored finds its source, and the other way round.
// The attempt there is 0-based (Flyte's retry attempt).
const (
	metaTaskVersion = "task-version"
	metaRun         = "execution-name"
	metaDomain      = "exec-domain"
	metaProject     = "exec-project"
	metaAction      = "exec-node"
	metaAttempt     = "exec-attempt"
	metaOrg         = "exec-org"
)

// IdentifierToProto is the v2 scope of k.
func IdentifierToProto(k Key) *cachev2.Identifier {
	return &cachev2.Identifier{Org: k.Org, Project: k.Project, Domain: k.Domain}
}

// KeyFromProto is the Key of a v2 request's scope and base key.
func KeyFromProto(id *cachev2.Identifier, key string) Key {
	return Key{Org: id.GetOrg(), Project: id.GetProject(), Domain: id.GetDomain(), Key: key}
}

// MetadataToProto is e's metadata as Flyte stores it.
func MetadataToProto(k Key, e Entry) *cachepb.Metadata {
	task := e.Task
	if task == nil {
		task = &core.Identifier{ResourceType: core.ResourceType_TASK, Org: k.Org, Project: k.Project, Domain: k.Domain}
	}
	values := map[string]string{metaTaskVersion: task.GetVersion()}
	add := func(key, v string) {
		if v != "" {
			values[key] = v
		}
	}
	add(metaOrg, e.Source.Org)
	add(metaProject, e.Source.Project)
	add(metaDomain, e.Source.Domain)
	add(metaRun, e.Source.Run)
	add(metaAction, e.Source.Action)
	if e.Source.Attempt > 0 {
		values[metaAttempt] = strconv.FormatUint(uint64(e.Source.Attempt-1), 10)
	}
	m := &cachepb.Metadata{SourceIdentifier: task, KeyMap: &cachepb.KeyMapMetadata{Values: values}}
	if !e.CreatedAt.IsZero() {
		m.CreatedAt = timestamppb.New(e.CreatedAt)
	}
	if !e.LastUpdatedAt.IsZero() {
		m.LastUpdatedAt = timestamppb.New(e.LastUpdatedAt)
	}
	return m
}

// EntryFromProto reads a cached output; an output without a URI reads as an
// entry with an empty OutputURI (Validate fails it).
func EntryFromProto(o *cachepb.CachedOutput) Entry {
	m := o.GetMetadata()
	v := m.GetKeyMap().GetValues()
	e := Entry{
		OutputURI: o.GetOutputUri(),
		Task:      m.GetSourceIdentifier(),
		Source: Source{Org: v[metaOrg], Project: v[metaProject], Domain: v[metaDomain],
			Run: v[metaRun], Action: v[metaAction]},
	}
	if a, err := strconv.ParseUint(v[metaAttempt], 10, 32); err == nil {
		e.Source.Attempt = uint32(a) + 1
	}
	if m.GetCreatedAt() != nil {
		e.CreatedAt = m.GetCreatedAt().AsTime()
	}
	if m.GetLastUpdatedAt() != nil {
		e.LastUpdatedAt = m.GetLastUpdatedAt().AsTime()
	}
	return e
}

// OutputToProto is e as a cached output of key k.
func OutputToProto(k Key, e Entry) *cachepb.CachedOutput {
	return &cachepb.CachedOutput{
		Output:   &cachepb.CachedOutput_OutputUri{OutputUri: e.OutputURI},
		Metadata: MetadataToProto(k, e),
	}
}

// ReservationToProto converts r of key k.
func ReservationToProto(k Key, r Reservation) *cachepb.Reservation {
	return &cachepb.Reservation{Key: k.Key, OwnerId: r.Owner, ExpiresAt: timestamppb.New(r.ExpiresAt),
		HeartbeatInterval: durationpb.New(r.HeartbeatInterval)}
}

// ReservationFromProto converts r.
func ReservationFromProto(r *cachepb.Reservation) Reservation {
	out := Reservation{Owner: r.GetOwnerId()}
	if r.GetExpiresAt() != nil {
		out.ExpiresAt = r.GetExpiresAt().AsTime()
	}
	if r.GetHeartbeatInterval() != nil {
		out.HeartbeatInterval = r.GetHeartbeatInterval().AsDuration()
	}
	return out
}
