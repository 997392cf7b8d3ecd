// Package sqlstore is what the embedded services' SQL stores share: opening
// SQLite or PostgreSQL, the migration runner, and the placeholder dialects.
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the pure-Go "sqlite" driver
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

// SQLiteOptions tune OpenSQLite.
type SQLiteOptions struct {
	// Durable makes a commit survive power loss (synchronous=FULL); otherwise
	// only a process crash (NORMAL), which is cheaper.
	Durable bool
}

// OpenSQLite opens (creating it and its directory if needed) the database
// file at path in WAL mode. Transactions take the write lock up front
// (_txlock=immediate), so a read-then-write transaction never fails on lock
// upgrade and two of them cannot interleave.
func OpenSQLite(ctx context.Context, path string, o SQLiteOptions) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: data directory: %w", err)
	}
	sync := "NORMAL"
	if o.Durable {
		sync = "FULL"
	}
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(" + sync + ")"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return &DB{DB: db, Dialect: SQLite}, nil
}

// OpenPostgres connects to the database at dsn (a URL or key=value string).
func OpenPostgres(ctx context.Context, dsn string) (*DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	db.SetMaxOpenConns(16)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	return &DB{DB: db, Dialect: Postgres}, nil
}

// Config chooses the database: PostgreSQL when PostgresDSN is set, else
// SQLite in DataDir.
type Config struct {
	DataDir     string
	PostgresDSN string
}

// Open opens the database cfg chooses; sqliteFile is the file's name in DataDir.
func Open(ctx context.Context, cfg Config, sqliteFile string, o SQLiteOptions) (*DB, error) {
	if cfg.PostgresDSN != "" {
		return OpenPostgres(ctx, cfg.PostgresDSN)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("a data directory or a PostgreSQL DSN is required")
	}
	return OpenSQLite(ctx, filepath.Join(cfg.DataDir, sqliteFile), o)
}

// OpenMigrated opens the database cfg chooses and brings it to schema; on
// failure nothing stays open.
func OpenMigrated(ctx context.Context, cfg Config, sqliteFile string, o SQLiteOptions, schema Schema) (*DB, error) {
	db, err := Open(ctx, cfg, sqliteFile, o)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, db, schema); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
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
