package eventsvc

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// SQLiteFile is the database file's name inside the data directory.
const SQLiteFile = "events.db"

var sqliteDialect = dialect{
	name: "sqlite",
	migrations: [][]string{{
		`CREATE TABLE action_events (
			seq              INTEGER PRIMARY KEY AUTOINCREMENT,
			project          TEXT    NOT NULL,
			domain           TEXT    NOT NULL,
			run              TEXT    NOT NULL,
			action           TEXT    NOT NULL,
			attempt          INTEGER NOT NULL,
			phase            INTEGER NOT NULL,
			version          INTEGER NOT NULL,
			parent_action    TEXT    NOT NULL,
			updated_time_ns  INTEGER NOT NULL,
			reported_time_ns INTEGER NOT NULL,
			error_code       TEXT    NOT NULL,
			error_kind       INTEGER NOT NULL,
			event            BLOB    NOT NULL,
			stored_at_ns     INTEGER NOT NULL,
			UNIQUE (project, domain, run, action, attempt, phase, version)
		)`,
		`CREATE INDEX action_events_by_run ON action_events (run, seq)`,
	}},
}

// OpenSQLite opens (creating it if needed) dataDir/events.db and migrates it.
// WAL with synchronous=FULL: a committed batch survives a crash or power
// loss, which the executor's at-least-once promise rests on.
func OpenSQLite(ctx context.Context, dataDir string) (Store, error) {
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: data directory: %w", err)
	}
	path := filepath.Join(dataDir, SQLiteFile)
	q := url.Values{}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(FULL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate") // writers take the lock up front instead of failing on upgrade
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
	s, err := newSQLStore(ctx, db, sqliteDialect)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}
