package eventsvc

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

var postgresDialect = dialect{
	name:     "postgres",
	numbered: true,
	// Any constant works; it only has to be the same for every replica.
	lock: `SELECT pg_advisory_xact_lock(4471001)`,
	migrations: [][]string{{
		`CREATE TABLE action_events (
			seq              BIGINT   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			project          TEXT     NOT NULL,
			domain           TEXT     NOT NULL,
			run              TEXT     NOT NULL,
			action           TEXT     NOT NULL,
			attempt          BIGINT   NOT NULL,
			phase            INTEGER  NOT NULL,
			version          BIGINT   NOT NULL,
			parent_action    TEXT     NOT NULL,
			updated_time_ns  BIGINT   NOT NULL,
			reported_time_ns BIGINT   NOT NULL,
			error_code       TEXT     NOT NULL,
			error_kind       INTEGER  NOT NULL,
			event            BYTEA    NOT NULL,
			stored_at_ns     BIGINT   NOT NULL,
			UNIQUE (project, domain, run, action, attempt, phase, version)
		)`,
		`CREATE INDEX action_events_by_run ON action_events (run, seq)`,
	}},
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
		return nil, fmt.Errorf("events store: a data directory or a PostgreSQL DSN is required")
	}
	return OpenSQLite(ctx, cfg.DataDir)
}
