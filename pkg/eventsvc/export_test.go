package eventsvc

import (
	"context"
	"fmt"
	"sync"

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

// HoldCommitForTest makes the next Record of s stop after its inserts, with
// its transaction open: inserted is closed then, and the Record commits once
// release is called.
func HoldCommitForTest(s Store) (inserted <-chan struct{}, release func()) {
	ss := s.(*sqlStore)
	in, rel := make(chan struct{}), make(chan struct{})
	hook := func() { close(in); <-rel }
	ss.beforeCommit.Store(&hook)
	var once sync.Once
	return in, func() { once.Do(func() { close(rel) }) }
}
