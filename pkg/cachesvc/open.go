package cachesvc

import (
	"context"

	"github.com/taskaction/executor/internal/sqlstore"
)

// SQLiteFile is the database file's name inside the data directory; it
// differs from the events service's, so both may share a directory.
const SQLiteFile = "cache.db"

// opener opens the cache store; what is not said here is sqlstore's.
var opener = sqlstore.Opener[Store]{
	Name:       "cache store",
	SQLiteFile: SQLiteFile,
	// A lost entry only costs a recomputation, so SQLite commits need only
	// survive a process crash, not power loss.
	SQLite: sqlstore.SQLiteOptions{Durable: false},
	Schema: schema,
	New:    newSQLStore,
}

// OpenSQLite opens (creating it if needed) dataDir/cache.db and migrates it.
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
