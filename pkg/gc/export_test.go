package gc

import (
	"context"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// SetBeforeDelete installs a hook that runs between the check of a
// TaskAction and its DELETE, so tests can race the collector.
func (g *GC) SetBeforeDelete(f func(ctx context.Context, ta *flytev1.TaskAction)) { g.beforeDelete = f }
