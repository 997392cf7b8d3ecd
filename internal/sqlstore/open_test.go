package sqlstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskaction/executor/internal/sqlstore"
)

func TestOpenNeedsALocation(t *testing.T) {
	if _, err := sqlstore.Open(context.Background(), sqlstore.Config{}, "x.db", sqlstore.SQLiteOptions{}); err == nil {
		t.Fatal("Open with neither a data directory nor a DSN succeeded")
	}
}

func TestOpenerOpensMigratesAndNamesItsErrors(t *testing.T) {
	ctx := context.Background()
	migrations := [][]string{{`CREATE TABLE t (a INTEGER)`}}
	o := sqlstore.Opener[*sqlstore.DB]{
		Name:       "test store",
		SQLiteFile: "test.db",
		Schema: sqlstore.Schema{VersionTable: "t_migrations", LockID: 1,
			Migrations: func(sqlstore.Dialect) [][]string { return migrations }},
		New: func(db *sqlstore.DB) *sqlstore.DB { return db },
	}
	dir := filepath.Join(t.TempDir(), "data")
	db, err := o.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO t (a) VALUES (1)`); err != nil {
		t.Fatalf("not migrated: %v", err)
	}
	_ = db.Close()
	if _, err := os.Stat(filepath.Join(dir, "test.db")); err != nil {
		t.Fatalf("the SQLite file is not in the data directory: %v", err)
	}

	if _, err := o.Open(ctx, sqlstore.Config{}); err == nil || !strings.HasPrefix(err.Error(), "test store: ") {
		t.Fatalf("no location: err = %v, want one prefixed with the store's name", err)
	}
	migrations = append(migrations, []string{`NOT SQL`})
	if _, err := o.OpenSQLite(ctx, dir); err == nil || !strings.HasPrefix(err.Error(), "test store: ") {
		t.Fatalf("a failing migration: err = %v, want one prefixed with the store's name", err)
	}
}
