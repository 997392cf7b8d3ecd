package eventsvc

import (
	"context"

	"github.com/taskaction/executor/internal/sqlstore"
)

// SQLiteFile is the database file's name inside the data directory.
const SQLiteFile = "events.db"

// opener opens the events store; what is not said here is sqlstore's.
var opener = sqlstore.Opener[Store]{
	Name:       "events store",
	SQLiteFile: SQLiteFile,
	// A committed batch must survive a crash or power loss: the executor's
	// at-least-once promise rests on it.
	SQLite: sqlstore.SQLiteOptions{Durable: true},
	Schema: schema,
	New:    newSQLStore,
}

// OpenSQLite opens (creating it if needed) dataDir/events.db and migrates it.
func OpenSQLite(ctx context.Context, dataDir string) (Store, error) {
	return opener.OpenSQLite(ctx, dataDir)
}

// OpenPostgres connects to the database at dsn (a URL or key=value string)
// and migrates it.
func OpenPostgres(ctx context.Context, dsn string) (Store, error) {
	return opener.OpenPostgres(ctx, dsn)
}

// StoreConfig chooses the store: PostgreSQL when PostgresDSN is set, else
// SQLite in DataDir.
type StoreConfig = sqlstore.Config

// OpenStore opens the store cfg chooses.
func OpenStore(ctx context.Context, cfg StoreConfig) (Store, error) {
	return opener.Open(ctx, cfg)
}
