package sqlstore_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskaction/executor/internal/sqlstore"
)

func TestRebind(t *testing.T) {
	for _, tc := range []struct {
		d        sqlstore.Dialect
		in, want string
	}{
		{sqlstore.SQLite, "a = ? AND b = ?", "a = ? AND b = ?"},
		{sqlstore.Postgres, "a = ? AND b = ?", "a = $1 AND b = $2"},
		{sqlstore.Postgres, "no placeholders", "no placeholders"},
	} {
		if got := tc.d.Rebind(tc.in); got != tc.want {
			t.Errorf("%s.Rebind(%q) = %q, want %q", tc.d.Name, tc.in, got, tc.want)
		}
	}
}

func TestMigrateAppliesOnceAndRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := sqlstore.OpenSQLite(ctx, path, sqlstore.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	v1 := [][]string{{`CREATE TABLE t (a INTEGER)`}}
	schema := func(m [][]string) sqlstore.Schema {
		return sqlstore.Schema{VersionTable: "x_migrations", LockID: 1, Migrations: func(sqlstore.Dialect) [][]string { return m }}
	}
	if err := sqlstore.Migrate(ctx, db, schema(v1)); err != nil {
		t.Fatal(err)
	}
	// Again: nothing to do (re-running CREATE TABLE t would fail).
	if err := sqlstore.Migrate(ctx, db, schema(v1)); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	v2 := append(v1, []string{`ALTER TABLE t ADD COLUMN b TEXT`})
	if err := sqlstore.Migrate(ctx, db, schema(v2)); err != nil {
		t.Fatalf("migrate to v2: %v", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO t (a, b) VALUES (1, 'x')`); err != nil {
		t.Fatalf("v2 column missing: %v", err)
	}
	err = sqlstore.Migrate(ctx, db, schema(v1))
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("old binary on a newer schema: err = %v", err)
	}
	// A failing migration leaves the version where it was.
	bad := append(v2, []string{`CREATE TABLE u (a INTEGER)`, `NOT SQL`})
	if err := sqlstore.Migrate(ctx, db, schema(bad)); err == nil {
		t.Fatal("a bad migration succeeded")
	}
	if _, err := db.ExecContext(ctx, `SELECT * FROM u`); err == nil {
		t.Fatal("a failed migration left part of its work behind")
	}
}
