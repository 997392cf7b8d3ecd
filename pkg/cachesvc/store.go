// Package cachesvc is the embedded cache service: Flyte's
// flyteidl2.cacheservice.v2.CacheService over SQLite or PostgreSQL, keeping
// cache entries (an output URI and Flyte's metadata) and reservations.
package cachesvc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	cachepb "github.com/taskaction/executor/gen/flyteidl2/cacheservice"
	"github.com/taskaction/executor/internal/sqlstore"
	"github.com/taskaction/executor/pkg/cache"
)

// Store keeps entries and reservations. Keys and entries are valid (the
// Service checks them). Implementations: OpenSQLite and OpenPostgres.
//
// Every write is one atomic statement (or transaction) whose outcome does not
// depend on an earlier read, so concurrent callers, on one replica or several
// sharing a PostgreSQL database, cannot both win.
type Store interface {
	// Get returns key's entry if it was last updated at or after notBefore
	// (the zero time: any age).
	Get(ctx context.Context, key cache.Key, notBefore time.Time) (cache.Entry, bool, error)
	// Put stores e under key, last updated at e.LastUpdatedAt. A zero
	// e.CreatedAt keeps the replaced entry's creation time (or takes
	// e.LastUpdatedAt for a new key). If an entry last updated at or after
	// notBefore is there and overwrite is false, it keeps that one and
	// returns stored=false.
	Put(ctx context.Context, key cache.Key, e cache.Entry, overwrite bool, notBefore time.Time) (stored bool, err error)
	// Delete removes key's entry and says whether there was one.
	Delete(ctx context.Context, key cache.Key) (found bool, err error)
	// GetOrExtendReservation gives owner key's reservation until now+3×heartbeat
	// when there is none, it expired by now, or owner holds it; else it
	// returns the holder's.
	GetOrExtendReservation(ctx context.Context, key cache.Key, owner string, heartbeat time.Duration, now time.Time) (cache.Reservation, error)
	// ReleaseReservation deletes key's reservation if owner holds it.
	ReleaseReservation(ctx context.Context, key cache.Key, owner string) error
	// PurgeReservations deletes reservations that expired before t.
	PurgeReservations(ctx context.Context, t time.Time) (int64, error)
	Ping(ctx context.Context) error
	Close() error
}

// GraceMultiplier: a reservation outlives its last heartbeat by this many
// intervals, so one slow reconcile does not hand the key to another owner.
const GraceMultiplier = 3

// schema is the cache's migration history. Version 1 was keyed by the
// executor's own (project, domain, task name, task version, cache key);
// version 2 keys entries as Flyte does, by (org, project, domain, key), and
// drops the old tables: their keys can never be asked for again, and a cache
// entry only costs a recomputation.
var schema = sqlstore.Schema{
	VersionTable: "cache_schema_migrations",
	// Differs from the events service's, so the two migrate independently in
	// a shared database.
	LockID: 4471002,
	Migrations: func(sqlstore.Dialect) [][]string {
		// Both databases take the same schema: TEXT and BIGINT mean the same in each.
		return [][]string{schemaV1, schemaV2}
	},
}

var schemaV1 = []string{
	`CREATE TABLE cache_entries (
		project       TEXT   NOT NULL,
		domain        TEXT   NOT NULL,
		task_name     TEXT   NOT NULL,
		task_version  TEXT   NOT NULL,
		cache_key     TEXT   NOT NULL,
		output_uri    TEXT   NOT NULL,
		src_project   TEXT   NOT NULL,
		src_domain    TEXT   NOT NULL,
		src_run       TEXT   NOT NULL,
		src_action    TEXT   NOT NULL,
		src_attempt   BIGINT NOT NULL,
		created_at_ns BIGINT NOT NULL,
		PRIMARY KEY (project, domain, task_name, task_version, cache_key)
	)`,
	`CREATE TABLE cache_reservations (
		project       TEXT   NOT NULL,
		domain        TEXT   NOT NULL,
		task_name     TEXT   NOT NULL,
		task_version  TEXT   NOT NULL,
		cache_key     TEXT   NOT NULL,
		owner         TEXT   NOT NULL,
		heartbeat_ns  BIGINT NOT NULL,
		expires_at_ns BIGINT NOT NULL,
		PRIMARY KEY (project, domain, task_name, task_version, cache_key)
	)`,
	`CREATE INDEX cache_reservations_by_expiry ON cache_reservations (expires_at_ns)`,
}

var schemaV2 = []string{
	`DROP TABLE cache_entries`,
	`DROP TABLE cache_reservations`,
	// metadata is Flyte's cacheservice.Metadata without its two timestamps,
	// which live in their own columns.
	`CREATE TABLE cache_outputs (
		org             TEXT   NOT NULL,
		project         TEXT   NOT NULL,
		domain          TEXT   NOT NULL,
		cache_key       TEXT   NOT NULL,
		output_uri      TEXT   NOT NULL,
		metadata        BYTEA  NOT NULL,
		created_at_ns   BIGINT NOT NULL,
		last_updated_ns BIGINT NOT NULL,
		PRIMARY KEY (org, project, domain, cache_key)
	)`,
	`CREATE TABLE cache_reservations (
		org           TEXT   NOT NULL,
		project       TEXT   NOT NULL,
		domain        TEXT   NOT NULL,
		cache_key     TEXT   NOT NULL,
		owner         TEXT   NOT NULL,
		heartbeat_ns  BIGINT NOT NULL,
		expires_at_ns BIGINT NOT NULL,
		PRIMARY KEY (org, project, domain, cache_key)
	)`,
	`CREATE INDEX cache_reservations_by_expiry ON cache_reservations (expires_at_ns)`,
}

// sqlStore is the Store over database/sql shared by both databases.
type sqlStore struct {
	db *sqlstore.DB
}

func newSQLStore(db *sqlstore.DB) Store { return &sqlStore{db: db} }

const (
	keyColumns = "org, project, domain, cache_key"
	keyWhere   = "org = ? AND project = ? AND domain = ? AND cache_key = ?"
)

func keyArgs(k cache.Key) []any { return []any{k.Org, k.Project, k.Domain, k.Key} }

// nanos maps the zero time to the smallest value, so "at or after the zero
// time" holds for every entry.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

func fromNanos(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// metadataBlob is e's metadata without the timestamps the columns hold.
func metadataBlob(k cache.Key, e cache.Entry) ([]byte, error) {
	e.CreatedAt, e.LastUpdatedAt = time.Time{}, time.Time{}
	return proto.MarshalOptions{Deterministic: true}.Marshal(cache.MetadataToProto(k, e))
}

func (s *sqlStore) Get(ctx context.Context, key cache.Key, notBefore time.Time) (cache.Entry, bool, error) {
	var uri string
	var blob []byte
	var created, updated int64
	err := s.db.QueryRowContext(ctx, s.db.Rebind(`SELECT output_uri, metadata, created_at_ns, last_updated_ns
		FROM cache_outputs WHERE `+keyWhere+` AND last_updated_ns >= ?`), append(keyArgs(key), nanos(notBefore))...).
		Scan(&uri, &blob, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return cache.Entry{}, false, nil
	}
	if err != nil {
		return cache.Entry{}, false, s.db.Errorf("get entry %s: %w", key, err)
	}
	meta := &cachepb.Metadata{}
	if err := proto.Unmarshal(blob, meta); err != nil {
		return cache.Entry{}, false, fmt.Errorf("decoding the metadata of entry %s: %w", key, err)
	}
	e := cache.EntryFromProto(&cachepb.CachedOutput{Output: &cachepb.CachedOutput_OutputUri{OutputUri: uri}, Metadata: meta})
	e.CreatedAt, e.LastUpdatedAt = fromNanos(created), fromNanos(updated)
	return e, true, nil
}

func (s *sqlStore) Put(ctx context.Context, key cache.Key, e cache.Entry, overwrite bool, notBefore time.Time) (bool, error) {
	blob, err := metadataBlob(key, e)
	if err != nil {
		return false, fmt.Errorf("encoding the metadata of entry %s: %w", key, err)
	}
	created := e.CreatedAt
	if created.IsZero() {
		created = e.LastUpdatedAt
	}
	// The upsert decides in one statement; a conflicting writer waits on the
	// row lock, then sees the winner's row and its WHERE fails.
	q := `INSERT INTO cache_outputs (` + keyColumns + `, output_uri, metadata, created_at_ns, last_updated_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (` + keyColumns + `) DO UPDATE SET
			output_uri = excluded.output_uri, metadata = excluded.metadata,
			last_updated_ns = excluded.last_updated_ns,
			created_at_ns = CASE WHEN ? THEN excluded.created_at_ns ELSE cache_outputs.created_at_ns END`
	args := append(keyArgs(key), e.OutputURI, blob, created.UnixNano(), e.LastUpdatedAt.UnixNano(), !e.CreatedAt.IsZero())
	if !overwrite {
		q += ` WHERE cache_outputs.last_updated_ns < ?`
		args = append(args, nanos(notBefore))
	}
	q += ` RETURNING last_updated_ns`
	var updated int64
	err = s.db.QueryRowContext(ctx, s.db.Rebind(q), args...).Scan(&updated)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.db.Errorf("put entry %s: %w", key, err)
	}
	return true, nil
}

func (s *sqlStore) Delete(ctx context.Context, key cache.Key) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.db.Rebind(`DELETE FROM cache_outputs WHERE `+keyWhere), keyArgs(key)...)
	if err != nil {
		return false, s.db.Errorf("delete entry %s: %w", key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, s.db.Errorf("delete entry %s: %w", key, err)
	}
	return n > 0, nil
}

func (s *sqlStore) GetOrExtendReservation(ctx context.Context, key cache.Key, owner string, heartbeat time.Duration, now time.Time) (cache.Reservation, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return cache.Reservation{}, s.db.Errorf("begin reservation %s: %w", key, err)
	}
	defer func() { _ = tx.Rollback() }()
	expires := now.Add(GraceMultiplier * heartbeat)
	// Take the row if free, expired or ours. When the WHERE fails no row is
	// returned, but PostgreSQL still locks the row (and SQLite's IMMEDIATE
	// transaction holds the database), so the holder read below is current.
	var r cache.Reservation
	var hb, exp int64
	err = tx.QueryRowContext(ctx, s.db.Rebind(`INSERT INTO cache_reservations (`+keyColumns+`, owner, heartbeat_ns, expires_at_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (`+keyColumns+`) DO UPDATE SET
			owner = excluded.owner, heartbeat_ns = excluded.heartbeat_ns, expires_at_ns = excluded.expires_at_ns
		WHERE cache_reservations.owner = excluded.owner OR cache_reservations.expires_at_ns <= ?
		RETURNING owner, heartbeat_ns, expires_at_ns`),
		append(keyArgs(key), owner, int64(heartbeat), expires.UnixNano(), now.UnixNano())...).Scan(&r.Owner, &hb, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.QueryRowContext(ctx, s.db.Rebind(`SELECT owner, heartbeat_ns, expires_at_ns FROM cache_reservations WHERE `+keyWhere),
			keyArgs(key)...).Scan(&r.Owner, &hb, &exp)
	}
	if err != nil {
		return cache.Reservation{}, s.db.Errorf("reservation %s for %s: %w", key, owner, err)
	}
	if err := tx.Commit(); err != nil {
		return cache.Reservation{}, s.db.Errorf("commit reservation %s for %s: %w", key, owner, err)
	}
	r.HeartbeatInterval = time.Duration(hb)
	r.ExpiresAt = fromNanos(exp)
	return r, nil
}

func (s *sqlStore) ReleaseReservation(ctx context.Context, key cache.Key, owner string) error {
	if _, err := s.db.ExecContext(ctx, s.db.Rebind(`DELETE FROM cache_reservations WHERE `+keyWhere+` AND owner = ?`),
		append(keyArgs(key), owner)...); err != nil {
		return s.db.Errorf("release reservation %s for %s: %w", key, owner, err)
	}
	return nil
}

func (s *sqlStore) PurgeReservations(ctx context.Context, t time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.db.Rebind(`DELETE FROM cache_reservations WHERE expires_at_ns < ?`), t.UnixNano())
	if err != nil {
		return 0, s.db.Errorf("purge expired reservations: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.db.Errorf("count purged reservations: %w", err)
	}
	return n, nil
}

func (s *sqlStore) Ping(ctx context.Context) error { return s.db.Ping(ctx) }

func (s *sqlStore) Close() error { return s.db.Close() }
