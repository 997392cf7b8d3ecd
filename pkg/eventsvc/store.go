// Package eventsvc is the embedded events service: Flyte's
// flyteidl2.workflow.EventsProxyService, storing the executor's ActionEvents
// durably (SQLite or PostgreSQL), and a read side to list and watch them.
package eventsvc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/internal/sqlstore"
)

// Store keeps events. Implementations: OpenSQLite and OpenPostgres.
type Store interface {
	// Record stores events in one transaction, skipping those whose identity
	// (org, project, domain, run, action, attempt, phase, version) is already
	// stored or came earlier in events: the first one is kept. Events must be
	// valid (events.ValidateProto).
	Record(ctx context.Context, events []*workflow.ActionEvent) (stored, duplicates int, err error)
	// List returns up to q.Limit events of q's run after q.AfterSeq, in storage order.
	List(ctx context.Context, q Query) ([]StoredEvent, error)
	Ping(ctx context.Context) error
	Close() error
}

// Query selects a run's events; empty Org, Project, Domain or Action match any.
type Query struct {
	Org, Project, Domain, Run, Action string
	AfterSeq                          int64
	Limit                             int
}

// StoredEvent is an event and its storage sequence number, which grows in
// commit order, across every process writing to the database (see
// sqlStore.Record), so readers can resume after it.
type StoredEvent struct {
	Seq   int64
	Event *workflow.ActionEvent
}

// schema is the events' migration history. Version 1 stored the executor's
// own event message; version 2 stores Flyte's ActionEvent, whose identity has
// an org. The version 1 table is kept as legacy_action_events (its rows are
// not Flyte's messages, so nothing reads them).
var schema = sqlstore.Schema{
	VersionTable: "schema_migrations",
	// Any constant works; it only has to be the same for every replica.
	LockID: 4471001,
	Migrations: func(d sqlstore.Dialect) [][]string {
		seq, blob := "INTEGER PRIMARY KEY AUTOINCREMENT", "BLOB"
		if d == sqlstore.Postgres {
			seq, blob = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "BYTEA"
		}
		v1 := []string{
			`CREATE TABLE action_events (
				seq              ` + seq + `,
				project          TEXT    NOT NULL,
				domain           TEXT    NOT NULL,
				run              TEXT    NOT NULL,
				action           TEXT    NOT NULL,
				attempt          BIGINT  NOT NULL,
				phase            INTEGER NOT NULL,
				version          BIGINT  NOT NULL,
				parent_action    TEXT    NOT NULL,
				updated_time_ns  BIGINT  NOT NULL,
				reported_time_ns BIGINT  NOT NULL,
				error_code       TEXT    NOT NULL,
				error_kind       INTEGER NOT NULL,
				event            ` + blob + ` NOT NULL,
				stored_at_ns     BIGINT  NOT NULL,
				UNIQUE (project, domain, run, action, attempt, phase, version)
			)`,
			`CREATE INDEX action_events_by_run ON action_events (run, seq)`,
		}
		v2 := []string{
			`DROP INDEX action_events_by_run`,
			`ALTER TABLE action_events RENAME TO legacy_action_events`,
			`CREATE TABLE action_events (
				seq              ` + seq + `,
				org              TEXT    NOT NULL,
				project          TEXT    NOT NULL,
				domain           TEXT    NOT NULL,
				run              TEXT    NOT NULL,
				action           TEXT    NOT NULL,
				attempt          BIGINT  NOT NULL,
				phase            INTEGER NOT NULL,
				version          BIGINT  NOT NULL,
				updated_time_ns  BIGINT  NOT NULL,
				reported_time_ns BIGINT  NOT NULL,
				error_kind       INTEGER NOT NULL,
				event            ` + blob + ` NOT NULL,
				stored_at_ns     BIGINT  NOT NULL,
				UNIQUE (org, project, domain, run, action, attempt, phase, version)
			)`,
			`CREATE INDEX action_events_by_run ON action_events (run, seq)`,
		}
		return [][]string{v1, v2}
	},
}

// writeLockID is the database lock every Record holds from before its
// inserts to its commit, in every replica sharing the database. Any constant
// distinct from the schema's LockID (and the other stores') works.
const writeLockID = 4471002

// sqlStore is the Store over database/sql shared by both databases.
type sqlStore struct {
	db *sqlstore.DB
	// One writer at a time in this process (the database lock, writeLockID,
	// orders the processes): writers queue here rather than on connections.
	writeMu sync.Mutex
	// beforeCommit, when set, runs once between a Record's inserts and its
	// commit (tests hold a transaction open with it).
	beforeCommit atomic.Pointer[func()]
}

const insertColumns = "org, project, domain, run, action, attempt, phase, version, " +
	"updated_time_ns, reported_time_ns, error_kind, event, stored_at_ns"

const numInsertColumns = 13

// rowsPerInsert keeps multi-row INSERTs under both databases' parameter limits.
const rowsPerInsert = 200

func newSQLStore(db *sqlstore.DB) Store { return &sqlStore{db: db} }

type eventKey struct {
	org, project, domain, run, action string
	attempt, version                  uint32
	phase                             int32
}

func keyOf(e *workflow.ActionEvent) eventKey {
	run := e.GetId().GetRun()
	return eventKey{run.GetOrg(), run.GetProject(), run.GetDomain(), run.GetName(), e.GetId().GetName(),
		e.GetAttempt(), e.GetVersion(), int32(e.GetPhase())}
}

func (s *sqlStore) Record(ctx context.Context, events []*workflow.ActionEvent) (int, int, error) {
	// Drop repeats within the batch first: the first one is the one kept.
	seen := make(map[eventKey]struct{}, len(events))
	unique := make([]*workflow.ActionEvent, 0, len(events))
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
	placeholders := "(" + strings.TrimSuffix(strings.Repeat("?,", numInsertColumns), ",") + ")"

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, s.db.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// Sequence numbers are taken by the inserts and become visible at the
	// commit. Holding one database-wide lock across both, in every replica,
	// makes commit order the sequence order: a reader that has seen number n
	// committed can never later find a lower one, so Watch's cursor skips
	// nothing. (The sequence must not be cached per session, which it is not:
	// an identity column caches 1.)
	if err := s.db.LockTx(ctx, tx, writeLockID); err != nil {
		return 0, 0, fmt.Errorf("events write lock: %w", err)
	}
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
			q.WriteString(placeholders)
			k := keyOf(e)
			args = append(args, k.org, k.project, k.domain, k.run, k.action,
				int64(k.attempt), k.phase, int64(k.version),
				e.GetUpdatedTime().AsTime().UnixNano(), reportedNanos(e),
				int32(e.GetErrorInfo().GetKind()), blob, now)
		}
		q.WriteString(" ON CONFLICT (org, project, domain, run, action, attempt, phase, version) DO NOTHING")
		res, err := tx.ExecContext(ctx, s.db.Rebind(q.String()), args...)
		if err != nil {
			return 0, 0, s.db.Errorf("insert events: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, 0, s.db.Errorf("count inserted events: %w", err)
		}
		stored += int(n)
	}
	if hook := s.beforeCommit.Swap(nil); hook != nil {
		(*hook)()
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, s.db.Errorf("commit events: %w", err)
	}
	return stored, len(events) - stored, nil
}

func reportedNanos(e *workflow.ActionEvent) int64 {
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
	for _, f := range []struct{ col, v string }{{"org", q.Org}, {"project", q.Project}, {"domain", q.Domain}, {"action", q.Action}} {
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
	rows, err := s.db.QueryContext(ctx, s.db.Rebind(
		"SELECT seq, event FROM action_events WHERE "+strings.Join(where, " AND ")+" ORDER BY seq LIMIT ?"), args...)
	if err != nil {
		return nil, s.db.Errorf("list events of run %s: %w", q.Run, err)
	}
	defer func() { _ = rows.Close() }()
	var out []StoredEvent
	for rows.Next() {
		var se StoredEvent
		var blob []byte
		if err := rows.Scan(&se.Seq, &blob); err != nil {
			return nil, s.db.Errorf("read event row: %w", err)
		}
		se.Event = &workflow.ActionEvent{}
		if err := proto.Unmarshal(blob, se.Event); err != nil {
			return nil, fmt.Errorf("decoding stored event %d: %w", se.Seq, err)
		}
		out = append(out, se)
	}
	if err := rows.Err(); err != nil {
		return nil, s.db.Errorf("list events of run %s: %w", q.Run, err)
	}
	return out, nil
}

func (s *sqlStore) Ping(ctx context.Context) error { return s.db.Ping(ctx) }

func (s *sqlStore) Close() error { return s.db.Close() }
