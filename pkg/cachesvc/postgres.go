package cachesvc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

var postgresDialect = dialect{
	name:     "postgres",
	numbered: true,
	// Any constant works if every replica uses it; it differs from the events
	// service's so the two migrate independently in a shared database.
	lock:       `SELECT pg_advisory_xact_lock(4471002)`,
	migrations: [][]string{schemaV1},
}

// OpenPostgres connects to the database at dsn (a URL or key=value string)
// and migrates it.
func OpenPostgres(ctx context.Context, dsn string) (Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	db.SetMaxOpenConns(16)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	s, err := newSQLStore(ctx, db, postgresDialect)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// StoreConfig chooses the store: PostgreSQL when PostgresDSN is set, else
// SQLite in DataDir.
type StoreConfig struct {
	DataDir     string
	PostgresDSN string
}

// OpenStore opens the store cfg chooses.
func OpenStore(ctx context.Context, cfg StoreConfig) (Store, error) {
	if cfg.PostgresDSN != "" {
		return OpenPostgres(ctx, cfg.PostgresDSN)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("cache store: a data directory or a PostgreSQL DSN is required")
	}
	return OpenSQLite(ctx, cfg.DataDir)
}
