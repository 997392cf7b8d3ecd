// Opening a store: the SQLite file or the PostgreSQL database, then its
// migrations.

package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the pure-Go "sqlite" driver
)

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

// Opener is what a service says of its store to open it: what the store is
// called in errors, its SQLite file, how durable its SQLite commits must be,
// its schema, and how the service's store is made from the open database.
// The choice of database, the connection and the migrations are sqlstore's.
type Opener[S any] struct {
	// Name prefixes the errors of opening ("events store").
	Name string
	// SQLiteFile is the database file's name inside the data directory.
	SQLiteFile string
	SQLite     SQLiteOptions
	Schema     Schema
	// New makes the store on the migrated database, which it then owns.
	New func(*DB) S
}

// Open opens the database cfg chooses, brings it to the schema and makes the
// store on it; on failure nothing stays open.
func (o Opener[S]) Open(ctx context.Context, cfg Config) (S, error) {
	var none S
	db, err := Open(ctx, cfg, o.SQLiteFile, o.SQLite)
	if err != nil {
		return none, fmt.Errorf("%s: %w", o.Name, err)
	}
	if err := Migrate(ctx, db, o.Schema); err != nil {
		_ = db.Close()
		return none, fmt.Errorf("%s: %w", o.Name, err)
	}
	return o.New(db), nil
}

// OpenSQLite opens (creating it if needed) the SQLite file in dataDir.
func (o Opener[S]) OpenSQLite(ctx context.Context, dataDir string) (S, error) {
	return o.Open(ctx, Config{DataDir: dataDir})
}

// OpenPostgres opens the PostgreSQL database at dsn (a URL or key=value string).
func (o Opener[S]) OpenPostgres(ctx context.Context, dsn string) (S, error) {
	return o.Open(ctx, Config{PostgresDSN: dsn})
}
