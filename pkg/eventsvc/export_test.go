package eventsvc

import (
	"context"
	"fmt"

	"github.com/taskaction/executor/internal/sqlstore"
)

// TruncateForTest empties a store's events so subtests can share one database.
func TruncateForTest(s Store) error {
	ss, ok := s.(*sqlStore)
	if !ok {
		return fmt.Errorf("not a SQL store: %T", s)
	}
	_, err := ss.db.ExecContext(context.Background(), "DELETE FROM action_events")
	return err
}

// MigrateToForTest brings a database to schema version v only, as an older
// binary left it.
func MigrateToForTest(ctx context.Context, db *sqlstore.DB, v int) error {
	old := schema
	old.Migrations = func(d sqlstore.Dialect) [][]string { return schema.Migrations(d)[:v] }
	return sqlstore.Migrate(ctx, db, old)
}
