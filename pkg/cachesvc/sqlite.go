package cachesvc

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// SQLiteFile is the database file's name inside the data directory; it
// differs from the events service's, so both may share a directory.
const SQLiteFile = "cache.db"

var sqliteDialect = dialect{name: "sqlite", migrations: [][]string{schemaV1}}

// OpenSQLite opens (creating it if needed) dataDir/cache.db and migrates it.
func OpenSQLite(ctx context.Context, dataDir string) (Store, error) {
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: cache data directory: %w", err)
	}
	path := filepath.Join(dataDir, SQLiteFile)
	q := url.Values{}
	// A lost entry only costs a recomputation, so synchronous=NORMAL (durable
	// across process crashes, not power loss) is enough and cheaper.
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	// Transactions take the write lock up front: the reservation transaction
	// then cannot interleave with another, and never fails on lock upgrade.
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
	s, err := newSQLStore(ctx, db, sqliteDialect)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}
