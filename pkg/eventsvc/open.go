package eventsvc

import (
	"context"
	"fmt"

	"github.com/taskaction/executor/internal/sqlstore"
)

// SQLiteFile is the database file's name inside the data directory.
const SQLiteFile = "events.db"

// A committed batch must survive a crash or power loss: the executor's
// at-least-once promise rests on it.
var sqliteOptions = sqlstore.SQLiteOptions{Durable: true}

// OpenSQLite opens (creating it if needed) dataDir/events.db and migrates it.
func OpenSQLite(ctx context.Context, dataDir string) (Store, error) {
	return OpenStore(ctx, StoreConfig{DataDir: dataDir})
}

// OpenPostgres connects to the database at dsn (a URL or key=value string)
// and migrates it.
func OpenPostgres(ctx context.Context, dsn string) (Store, error) {
	return OpenStore(ctx, StoreConfig{PostgresDSN: dsn})
}

// StoreConfig chooses the store: PostgreSQL when PostgresDSN is set, else
// SQLite in DataDir.
type StoreConfig = sqlstore.Config

// OpenStore opens the store cfg chooses.
func OpenStore(ctx context.Context, cfg StoreConfig) (Store, error) {
	db, err := sqlstore.OpenMigrated(ctx, cfg, SQLiteFile, sqliteOptions, schema)
	if err != nil {
		return nil, fmt.Errorf("events store: %w", err)
	}
	return newSQLStore(db), nil
}
