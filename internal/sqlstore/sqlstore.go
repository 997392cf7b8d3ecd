// Package sqlstore is what the embedded services' SQL stores share: opening
// SQLite or PostgreSQL, the migration runner, and the placeholder dialects.
package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Dialect is what differs between the two databases in the SQL we write.
type Dialect struct {
	Name string
	// Numbered placeholders ($1) rather than ?.
	Numbered bool
}

var (
	SQLite   = Dialect{Name: "sqlite"}
	Postgres = Dialect{Name: "postgres", Numbered: true}
)

// Rebind turns ? placeholders into $n where the database wants them.
func (d Dialect) Rebind(q string) string {
	if !d.Numbered {
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

// DB is an open database and its dialect.
type DB struct {
	*sql.DB
	Dialect Dialect
}

// Rebind is the dialect's Rebind.
func (db *DB) Rebind(q string) string { return db.Dialect.Rebind(q) }

// Errorf prefixes an error with the database's name.
func (db *DB) Errorf(format string, args ...any) error {
	return fmt.Errorf(db.Dialect.Name+": "+format, args...)
}

// Ping checks the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("%s: %w", db.Dialect.Name, err)
	}
	return nil
}

// LockTx takes, for the rest of tx, the lock id names across every process
// using the database: on PostgreSQL a transaction-level advisory lock, which
// waits while another transaction holds it and is released by commit or
// rollback. On SQLite it does nothing: every transaction already holds the
// database's write lock from its start (_txlock=immediate), in every process
// that opens the file.
func (db *DB) LockTx(ctx context.Context, tx *sql.Tx, id int64) error {
	if db.Dialect != Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, id); err != nil {
		return db.Errorf("lock %d: %w", id, err)
	}
	return nil
}

// Schema is a store's migration history.
type Schema struct {
	// VersionTable records the applied versions. Each store has its own, so
	// stores may share a database.
	VersionTable string
	// LockID is the PostgreSQL advisory lock held while migrating, so replicas
	// migrate one at a time. Each store has its own.
	LockID int64
	// Migrations[i] brings the schema to version i+1, for a dialect.
	Migrations func(d Dialect) [][]string
}

// Migrate applies, in one transaction, the migrations the database has not
// seen. A database newer than the binary is refused rather than misread.
func Migrate(ctx context.Context, db *DB, s Schema) error {
	migrations := s.Migrations(db.Dialect)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return db.Errorf("begin migration: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := db.LockTx(ctx, tx, s.LockID); err != nil {
		return fmt.Errorf("migration: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+s.VersionTable+` (
		version INTEGER PRIMARY KEY, applied_at_ns BIGINT NOT NULL)`); err != nil {
		return db.Errorf("create %s: %w", s.VersionTable, err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+s.VersionTable).Scan(&current); err != nil {
		return db.Errorf("read schema version from %s: %w", s.VersionTable, err)
	}
	if current > len(migrations) {
		return db.Errorf("schema version %d in %s is newer than this binary knows (%d): refusing to run an old binary on it",
			current, s.VersionTable, len(migrations))
	}
	for v := current + 1; v <= len(migrations); v++ {
		for _, stmt := range migrations[v-1] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return db.Errorf("migration %d of %s: %w", v, s.VersionTable, err)
			}
		}
		if _, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO `+s.VersionTable+` (version, applied_at_ns) VALUES (?, ?)`),
			v, time.Now().UnixNano()); err != nil {
			return db.Errorf("record migration %d in %s: %w", v, s.VersionTable, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return db.Errorf("commit migrations of %s: %w", s.VersionTable, err)
	}
	return nil
}
