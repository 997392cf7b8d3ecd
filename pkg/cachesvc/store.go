// Package cachesvc is the cache service: it keeps task-output cache entries
// and reservations (SQLite or PostgreSQL) and serves them over connect-go.
package cachesvc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/taskaction/executor/pkg/cache"
)

// Store keeps entries and reservations. Keys and entries are valid (the
// Service checks them). Implementations: OpenSQLite and OpenPostgres.
//
// Every write is one atomic statement (or transaction) whose outcome does not
// depend on an earlier read, so concurrent callers, on one replica or several
// sharing a PostgreSQL database, cannot both win.
type Store interface {
	// Get returns key's entry if it was created at or after notBefore (the
	// zero time: any age).
	Get(ctx context.Context, key cache.Key, notBefore time.Time) (cache.Entry, bool, error)
	// Put stores e, with e.CreatedAt, under key. If an entry created at or
	// after notBefore is there and overwrite is false, it keeps that one and
	// returns stored=false.
	Put(ctx context.Context, key cache.Key, e cache.Entry, overwrite bool, notBefore time.Time) (stored bool, err error)
	// Delete removes key's entry if any.
	Delete(ctx context.Context, key cache.Key) error
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

// dialect holds what differs between the SQL databases.
type dialect struct {
	name string
	// migrations[i] brings the schema to version i+1; each is a list of statements.
	migrations [][]string
	// lock, if set, runs first in the migration transaction so replicas migrate one at a time.
	lock string
	// numbered placeholders ($1) rather than ?.
	numbered bool
}

// Both databases take the same schema: TEXT and BIGINT mean the same in each.
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

// sqlStore is the Store over database/sql shared by both databases.
type sqlStore struct {
	db *sql.DB
	d  dialect
}

func newSQLStore(ctx context.Context, db *sql.DB, d dialect) (*sqlStore, error) {
	s := &sqlStore{db: db, d: d}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// migrationsTable is the cache's own: the events service may share the
// PostgreSQL database and keeps its versions in schema_migrations.
const migrationsTable = "cache_schema_migrations"

// migrate applies the migrations the database has not seen, in one transaction.
func (s *sqlStore) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin migration: %w", s.d.name, err)
	}
	defer func() { _ = tx.Rollback() }()
	if s.d.lock != "" {
		if _, err := tx.ExecContext(ctx, s.d.lock); err != nil {
			return fmt.Errorf("%s: lock for migration: %w", s.d.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+migrationsTable+` (
		version INTEGER PRIMARY KEY, applied_at_ns BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("%s: create %s: %w", s.d.name, migrationsTable, err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+migrationsTable).Scan(&current); err != nil {
		return fmt.Errorf("%s: read cache schema version: %w", s.d.name, err)
	}
	if current > len(s.d.migrations) {
		return fmt.Errorf("%s: cache schema version %d is newer than this binary knows (%d): refusing to run an old binary on it",
			s.d.name, current, len(s.d.migrations))
	}
	for v := current + 1; v <= len(s.d.migrations); v++ {
		for _, stmt := range s.d.migrations[v-1] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("%s: cache migration %d: %w", s.d.name, v, err)
			}
		}
		if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO `+migrationsTable+` (version, applied_at_ns) VALUES (?, ?)`),
			v, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("%s: record cache migration %d: %w", s.d.name, v, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit cache migrations: %w", s.d.name, err)
	}
	return nil
}

// rebind turns ? placeholders into $n where the database wants them.
func (s *sqlStore) rebind(q string) string {
	if !s.d.numbered {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

const (
	keyColumns = "project, domain, task_name, task_version, cache_key"
	keyWhere   = "project = ? AND domain = ? AND task_name = ? AND task_version = ? AND cache_key = ?"
)

func keyArgs(k cache.Key) []any {
	return []any{k.Project, k.Domain, k.TaskName, k.TaskVersion, k.CacheKey}
}

// nanos maps the zero time to the smallest value, so "created at or after
// the zero time" holds for every entry.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

func fromNanos(ns int64) time.Time { return time.Unix(0, ns).UTC() }

func (s *sqlStore) Get(ctx context.Context, key cache.Key, notBefore time.Time) (cache.Entry, bool, error) {
	var e cache.Entry
	var attempt, created int64
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT output_uri, src_project, src_domain, src_run, src_action, src_attempt, created_at_ns
		FROM cache_entries WHERE `+keyWhere+` AND created_at_ns >= ?`), append(keyArgs(key), nanos(notBefore))...).
		Scan(&e.OutputURI, &e.Source.Project, &e.Source.Domain, &e.Source.Run, &e.Source.Action, &attempt, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return cache.Entry{}, false, nil
	}
	if err != nil {
		return cache.Entry{}, false, fmt.Errorf("%s: get entry %s: %w", s.d.name, key, err)
	}
	e.Source.Attempt = uint32(attempt)
	e.CreatedAt = fromNanos(created)
	return e, true, nil
}

func (s *sqlStore) Put(ctx context.Context, key cache.Key, e cache.Entry, overwrite bool, notBefore time.Time) (bool, error) {
	// The upsert decides in one statement; a conflicting writer waits on the
	// row lock, then sees the winner's row and its WHERE fails.
	q := `INSERT INTO cache_entries (` + keyColumns + `, output_uri, src_project, src_domain, src_run, src_action, src_attempt, created_at_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (` + keyColumns + `) DO UPDATE SET
			output_uri = excluded.output_uri, src_project = excluded.src_project, src_domain = excluded.src_domain,
			src_run = excluded.src_run, src_action = excluded.src_action, src_attempt = excluded.src_attempt,
			created_at_ns = excluded.created_at_ns`
	args := append(keyArgs(key), e.OutputURI, e.Source.Project, e.Source.Domain, e.Source.Run, e.Source.Action,
		int64(e.Source.Attempt), e.CreatedAt.UnixNano())
	if !overwrite {
		q += ` WHERE cache_entries.created_at_ns < ?`
		args = append(args, nanos(notBefore))
	}
	q += ` RETURNING created_at_ns`
	var created int64
	err := s.db.QueryRowContext(ctx, s.rebind(q), args...).Scan(&created)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: put entry %s: %w", s.d.name, key, err)
	}
	return true, nil
}

func (s *sqlStore) Delete(ctx context.Context, key cache.Key) error {
	if _, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM cache_entries WHERE `+keyWhere), keyArgs(key)...); err != nil {
		return fmt.Errorf("%s: delete entry %s: %w", s.d.name, key, err)
	}
	return nil
}

func (s *sqlStore) GetOrExtendReservation(ctx context.Context, key cache.Key, owner string, heartbeat time.Duration, now time.Time) (cache.Reservation, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return cache.Reservation{}, fmt.Errorf("%s: begin reservation %s: %w", s.d.name, key, err)
	}
	defer func() { _ = tx.Rollback() }()
	expires := now.Add(GraceMultiplier * heartbeat)
	// Take the row if free, expired or ours. When the WHERE fails no row is
	// returned, but PostgreSQL still locks the row (and SQLite's IMMEDIATE
	// transaction holds the database), so the holder read below is current.
	var r cache.Reservation
	var hb, exp int64
	err = tx.QueryRowContext(ctx, s.rebind(`INSERT INTO cache_reservations (`+keyColumns+`, owner, heartbeat_ns, expires_at_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (`+keyColumns+`) DO UPDATE SET
			owner = excluded.owner, heartbeat_ns = excluded.heartbeat_ns, expires_at_ns = excluded.expires_at_ns
		WHERE cache_reservations.owner = excluded.owner OR cache_reservations.expires_at_ns <= ?
		RETURNING owner, heartbeat_ns, expires_at_ns`),
		append(keyArgs(key), owner, int64(heartbeat), expires.UnixNano(), now.UnixNano())...).Scan(&r.Owner, &hb, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.QueryRowContext(ctx, s.rebind(`SELECT owner, heartbeat_ns, expires_at_ns FROM cache_reservations WHERE `+keyWhere),
			keyArgs(key)...).Scan(&r.Owner, &hb, &exp)
	}
	if err != nil {
		return cache.Reservation{}, fmt.Errorf("%s: reservation %s for %s: %w", s.d.name, key, owner, err)
	}
	if err := tx.Commit(); err != nil {
		return cache.Reservation{}, fmt.Errorf("%s: commit reservation %s for %s: %w", s.d.name, key, owner, err)
	}
	r.HeartbeatInterval = time.Duration(hb)
	r.ExpiresAt = fromNanos(exp)
	return r, nil
}

func (s *sqlStore) ReleaseReservation(ctx context.Context, key cache.Key, owner string) error {
	if _, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM cache_reservations WHERE `+keyWhere+` AND owner = ?`),
		append(keyArgs(key), owner)...); err != nil {
		return fmt.Errorf("%s: release reservation %s for %s: %w", s.d.name, key, owner, err)
	}
	return nil
}

func (s *sqlStore) PurgeReservations(ctx context.Context, t time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.rebind(`DELETE FROM cache_reservations WHERE expires_at_ns < ?`), t.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("%s: purge expired reservations: %w", s.d.name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: count purged reservations: %w", s.d.name, err)
	}
	return n, nil
}

func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("%s: %w", s.d.name, err)
	}
	return nil
}

func (s *sqlStore) Close() error { return s.db.Close() }
