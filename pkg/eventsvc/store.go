// Package eventsvc is the events service: it stores the executor's ActionEvents
// durably (SQLite or PostgreSQL) and serves them over connect-go.
package eventsvc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/taskaction/executor/gen/executor/events/v1"
)

// Store keeps events. Implementations: OpenSQLite and OpenPostgres.
type Store interface {
	// Record stores events in one transaction, skipping those whose identity
	// (project, domain, run, action, attempt, phase, version) is already
	// stored or came earlier in events: the first one is kept. Events must be
	// valid (events.ValidateProto).
	Record(ctx context.Context, events []*eventsv1.ActionEvent) (stored, duplicates int, err error)
	// List returns up to q.Limit events of q's run after q.AfterSeq, in storage order.
	List(ctx context.Context, q Query) ([]StoredEvent, error)
	Ping(ctx context.Context) error
	Close() error
}

// Query selects a run's events; empty Project, Domain or Action match any.
type Query struct {
	Project, Domain, Run, Action string
	AfterSeq                     int64
	Limit                        int
}

// StoredEvent is an event and its storage sequence number, which grows in
// commit order (the store serialises its writers) so readers can resume after it.
type StoredEvent struct {
	Seq   int64
	Event *eventsv1.ActionEvent
}

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

// sqlStore is the Store over database/sql shared by both databases.
type sqlStore struct {
	db *sql.DB
	d  dialect
	// One writer at a time keeps seq order equal to commit order, which Watch's
	// cursor relies on; batches are large, so this costs little.
	writeMu sync.Mutex
}

const insertColumns = "project, domain, run, action, attempt, phase, version, parent_action, " +
	"updated_time_ns, reported_time_ns, error_code, error_kind, event, stored_at_ns"

const numInsertColumns = 14

// rowsPerInsert keeps multi-row INSERTs under both databases' parameter limits.
const rowsPerInsert = 200

func newSQLStore(ctx context.Context, db *sql.DB, d dialect) (*sqlStore, error) {
	s := &sqlStore{db: db, d: d}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

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
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at_ns BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("%s: create schema_migrations: %w", s.d.name, err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("%s: read schema version: %w", s.d.name, err)
	}
	if current > len(s.d.migrations) {
		return fmt.Errorf("%s: schema version %d is newer than this binary knows (%d): refusing to run an old binary on it",
			s.d.name, current, len(s.d.migrations))
	}
	for v := current + 1; v <= len(s.d.migrations); v++ {
		for _, stmt := range s.d.migrations[v-1] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("%s: migration %d: %w", s.d.name, v, err)
			}
		}
		if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO schema_migrations (version, applied_at_ns) VALUES (?, ?)`),
			v, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("%s: record migration %d: %w", s.d.name, v, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit migrations: %w", s.d.name, err)
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

type eventKey struct {
	project, domain, run, action string
	attempt, version             uint32
	phase                        eventsv1.Phase
}

func keyOf(e *eventsv1.ActionEvent) eventKey {
	id := e.GetId()
	return eventKey{id.GetProject(), id.GetDomain(), id.GetRun(), id.GetAction(), e.GetAttempt(), e.GetVersion(), e.GetPhase()}
}

func (s *sqlStore) Record(ctx context.Context, events []*eventsv1.ActionEvent) (int, int, error) {
	// Drop repeats within the batch first: the first one is the one kept.
	seen := make(map[eventKey]struct{}, len(events))
	unique := make([]*eventsv1.ActionEvent, 0, len(events))
	for _, e := range events {
		k := keyOf(e)
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		unique = append(unique, e)
	}
	if len(unique) == 0 {
		return 0, len(events), nil
	}
	now := time.Now().UnixNano()
	args := make([]any, 0, rowsPerInsert*numInsertColumns)

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: begin: %w", s.d.name, err)
	}
	defer func() { _ = tx.Rollback() }()
	stored := 0
	for start := 0; start < len(unique); start += rowsPerInsert {
		chunk := unique[start:min(start+rowsPerInsert, len(unique))]
		args = args[:0]
		var q strings.Builder
		q.WriteString("INSERT INTO action_events (" + insertColumns + ") VALUES ")
		for i, e := range chunk {
			blob, err := proto.MarshalOptions{Deterministic: true}.Marshal(e)
			if err != nil {
				return 0, 0, fmt.Errorf("encoding event: %w", err)
			}
			if i > 0 {
				q.WriteString(",")
			}
			q.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
			id := e.GetId()
			args = append(args, id.GetProject(), id.GetDomain(), id.GetRun(), id.GetAction(),
				int64(e.GetAttempt()), int32(e.GetPhase()), int64(e.GetVersion()), e.GetParentAction(),
				e.GetUpdatedTime().AsTime().UnixNano(), reportedNanos(e), e.GetError().GetCode(),
				int32(e.GetError().GetKind()), blob, now)
		}
		q.WriteString(" ON CONFLICT (project, domain, run, action, attempt, phase, version) DO NOTHING")
		res, err := tx.ExecContext(ctx, s.rebind(q.String()), args...)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: insert events: %w", s.d.name, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, 0, fmt.Errorf("%s: count inserted events: %w", s.d.name, err)
		}
		stored += int(n)
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("%s: commit events: %w", s.d.name, err)
	}
	return stored, len(events) - stored, nil
}

func reportedNanos(e *eventsv1.ActionEvent) int64 {
	if e.GetReportedTime() == nil {
		return 0
	}
	return e.GetReportedTime().AsTime().UnixNano()
}

func (s *sqlStore) List(ctx context.Context, q Query) ([]StoredEvent, error) {
	if q.Run == "" {
		return nil, errors.New("list events: a run is required")
	}
	where := []string{"run = ?", "seq > ?"}
	args := []any{q.Run, q.AfterSeq}
	for _, f := range []struct{ col, v string }{{"project", q.Project}, {"domain", q.Domain}, {"action", q.Action}} {
		if f.v != "" {
			where = append(where, f.col+" = ?")
			args = append(args, f.v)
		}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, s.rebind(
		"SELECT seq, event FROM action_events WHERE "+strings.Join(where, " AND ")+" ORDER BY seq LIMIT ?"), args...)
	if err != nil {
		return nil, fmt.Errorf("%s: list events of run %s: %w", s.d.name, q.Run, err)
	}
	defer func() { _ = rows.Close() }()
	var out []StoredEvent
	for rows.Next() {
		var se StoredEvent
		var blob []byte
		if err := rows.Scan(&se.Seq, &blob); err != nil {
			return nil, fmt.Errorf("%s: read event row: %w", s.d.name, err)
		}
		se.Event = &eventsv1.ActionEvent{}
		if err := proto.Unmarshal(blob, se.Event); err != nil {
			return nil, fmt.Errorf("decoding stored event %d: %w", se.Seq, err)
		}
		out = append(out, se)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: list events of run %s: %w", s.d.name, q.Run, err)
	}
	return out, nil
}

func (s *sqlStore) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("%s: %w", s.d.name, err)
	}
	return nil
}

func (s *sqlStore) Close() error { return s.db.Close() }
