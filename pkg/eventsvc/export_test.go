package eventsvc

import (
	"context"
	"fmt"
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
