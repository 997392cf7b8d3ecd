// Package gc deletes terminal TaskActions some time after they became terminal.
package gc

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/metrics"
)

// TerminalIndex is the field index of the manager's cache that lists the
// terminal TaskActions (value "true"). The sweep reads the cache the
// reconciler keeps anyway: no List request, no copy of the objects, and no
// label write on every TaskAction to find them by.
const TerminalIndex = "executor.flyte.org/terminal"

// IndexTerminal is the index function of TerminalIndex.
func IndexTerminal(o client.Object) []string {
	if ta, ok := o.(*flytev1.TaskAction); ok && ta.Status.IsTerminal() {
		return []string{"true"}
	}
	return nil
}

// GC is a manager Runnable that sweeps terminal TaskActions once at start and
// then every Interval, on the leader only.
type GC struct {
	// Reader lists from a cache that has TerminalIndex.
	Reader client.Reader
	// Writer deletes.
	Writer client.Writer
	// Interval between sweeps; positive.
	Interval time.Duration
	// MaxTTL is how long a terminal TaskAction is kept; positive.
	MaxTTL time.Duration
	// Clock tells the time and ticks; nil means the real clock.
	Clock clock.WithTicker

	// beforeDelete, when set, runs between the check and the DELETE (tests).
	beforeDelete func(ctx context.Context, ta *flytev1.TaskAction)
}

// Result counts what one sweep saw and did.
type Result struct {
	Listed      int // TaskActions the index lists as terminal
	Deleted     int
	AlreadyGone int // NotFound on delete
	Recreated   int // UID precondition failed: a new object under the same name, kept
	Failed      int // other delete errors, retried on the next sweep
	NotTerminal int // listed but not terminal (a stale index entry): never deleted
	Kept        int // terminal but not expired, already deleting, or of unknown age
}

var _ manager.LeaderElectionRunnable = (*GC)(nil)

// New is the garbage collector cfg asks for: nil when gc.interval is 0
// (disabled), an error when it is enabled without a positive maxTTL.
func New(reader client.Reader, writer client.Writer, cfg config.GCConfig) (*GC, error) {
	if cfg.Interval.Duration <= 0 {
		return nil, nil
	}
	if cfg.MaxTTL.Duration <= 0 {
		return nil, fmt.Errorf("gc.maxTTL must be positive when gc is enabled")
	}
	return &GC{Reader: reader, Writer: writer, Interval: cfg.Interval.Duration, MaxTTL: cfg.MaxTTL.Duration}, nil
}

// Add adds the garbage collector to mgr, listing through the manager's cache
// (indexed by TerminalIndex). It adds nothing when gc is disabled.
func Add(mgr manager.Manager, cfg config.GCConfig) error {
	if cfg.Interval.Duration <= 0 {
		return nil
	}
	g, err := New(mgr.GetClient(), mgr.GetClient(), cfg)
	if err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &flytev1.TaskAction{}, TerminalIndex, IndexTerminal); err != nil {
		return fmt.Errorf("index terminal TaskActions: %w", err)
	}
	if err := mgr.Add(g); err != nil {
		return fmt.Errorf("add garbage collector: %w", err)
	}
	return nil
}

// NeedLeaderElection is true: two replicas sweeping would only race.
func (g *GC) NeedLeaderElection() bool { return true }

// Start sweeps at once and then every Interval until ctx is done. A failed
// sweep is logged and retried at the next tick; Start returns nil when ctx is
// done so that stopping the manager is not reported as an error.
func (g *GC) Start(ctx context.Context) error {
	if g.Interval <= 0 || g.MaxTTL <= 0 {
		return fmt.Errorf("garbage collector needs a positive interval and maxTTL, got %v and %v", g.Interval, g.MaxTTL)
	}
	ctx = logf.IntoContext(ctx, logf.FromContext(ctx).WithName("gc"))
	logf.FromContext(ctx).Info("starting garbage collector", "interval", g.Interval, "maxTTL", g.MaxTTL)
	g.runSweep(ctx)
	t := g.clock().NewTicker(g.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			g.runSweep(ctx)
		}
	}
}

func (g *GC) runSweep(ctx context.Context) {
	start := g.clock().Now()
	res, err := g.Sweep(ctx)
	if ctx.Err() != nil {
		return // stopping: neither a result nor an error worth reporting
	}
	metrics.ObserveGCSweep(g.clock().Since(start), err)
	log := logf.FromContext(ctx)
	if err != nil {
		log.Error(err, "garbage collection sweep ended early", "result", res)
		return
	}
	if res.Deleted+res.Failed+res.NotTerminal > 0 {
		log.Info("garbage collection sweep done", "deleted", res.Deleted, "failed", res.Failed,
			"alreadyGone", res.AlreadyGone, "recreated", res.Recreated, "notTerminal", res.NotTerminal, "listed", res.Listed)
	} else {
		log.V(1).Info("garbage collection sweep done", "listed", res.Listed, "kept", res.Kept)
	}
}

// Sweep lists the terminal TaskActions and deletes those expired. Delete
// failures are counted and do not stop it; a List failure ends it with an
// error.
func (g *GC) Sweep(ctx context.Context) (Result, error) {
	var res Result
	now := g.clock().Now()
	list := &flytev1.TaskActionList{}
	// Read only: the objects are the cache's own.
	if err := g.Reader.List(ctx, list, client.MatchingFields{TerminalIndex: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return res, fmt.Errorf("list terminal TaskActions: %w", err)
	}
	for i := range list.Items {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		g.collect(ctx, &list.Items[i], now, &res)
	}
	return res, nil
}

// collect decides on one listed TaskAction and deletes it if it is due.
func (g *GC) collect(ctx context.Context, ta *flytev1.TaskAction, now time.Time, res *Result) {
	res.Listed++
	log := logf.FromContext(ctx).WithValues("taskAction", client.ObjectKeyFromObject(ta))
	due, why := shouldDelete(ta, now, g.MaxTTL)
	switch {
	case why == reasonNotTerminal:
		res.NotTerminal++
		// Per object at V(1): the sweep summary counts them at Info every sweep.
		log.V(1).Info("not deleting a TaskAction listed as terminal that is not terminal")
		return
	case !due:
		res.Kept++
		if why == reasonUnknownAge {
			log.V(1).Info("not deleting a terminal TaskAction of unknown age: no completedAt and no usable completed-time label")
		}
		return
	}
	if g.beforeDelete != nil {
		g.beforeDelete(ctx, ta)
	}
	outcome, err := g.delete(ctx, ta.Namespace, ta.Name, ta.UID)
	metrics.GCDeletion(outcome)
	switch outcome {
	case metrics.GCDeleted:
		res.Deleted++
		log.V(1).Info("deleted expired TaskAction")
	case metrics.GCAlreadyGone:
		res.AlreadyGone++
	case metrics.GCRecreated:
		res.Recreated++
		log.V(1).Info("kept a TaskAction recreated under the name of an expired one")
	default:
		res.Failed++
		if ctx.Err() == nil {
			log.Error(err, "deleting expired TaskAction; retrying on the next sweep")
		}
	}
}

// delete deletes the TaskAction with this UID, and no other one of the same
// name. The reconciler then releases its finalizer (the deletion's second and
// last request). Background propagation lets its pods go with it.
func (g *GC) delete(ctx context.Context, namespace, name string, uid types.UID) (string, error) {
	ta := &flytev1.TaskAction{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err := g.Writer.Delete(ctx, ta, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch {
	case err == nil:
		return metrics.GCDeleted, nil
	case apierrors.IsNotFound(err):
		return metrics.GCAlreadyGone, nil
	case apierrors.IsConflict(err):
		// The only precondition is the UID: the name holds a different object.
		return metrics.GCRecreated, nil
	}
	return metrics.GCFailed, err
}

func (g *GC) clock() clock.WithTicker {
	if g.Clock == nil {
		return clock.RealClock{}
	}
	return g.Clock
}

// Reasons of shouldDelete.
const (
	reasonExpired     = "expired"
	reasonFresh       = "fresh"
	reasonNotTerminal = "not terminal"
	reasonDeleting    = "already deleting"
	reasonUnknownAge  = "unknown age"
)

// shouldDelete says whether ta is due for deletion at now, and why. Only a
// TaskAction that is terminal by its status is ever due, whatever its labels.
func shouldDelete(ta *flytev1.TaskAction, now time.Time, maxTTL time.Duration) (bool, string) {
	if !ta.Status.IsTerminal() { // the status's own word, not the label's
		return false, reasonNotTerminal
	}
	if !ta.DeletionTimestamp.IsZero() {
		return false, reasonDeleting // a second DELETE would change nothing
	}
	at, ok := terminalTime(ta)
	if !ok {
		return false, reasonUnknownAge
	}
	if now.Sub(at) < maxTTL {
		return false, reasonFresh
	}
	return true, reasonExpired
}

// terminalTime is when the executor recorded ta's end (its Succeeded or Failed
// condition, written when the end was recorded, not when the pod finished: an
// outage longer than the TTL does not make a fresh result collectable at once),
// or else the end of the minute its completed-time label names (written by
// Flyte's executor, which the executor may have replaced), so that the label's
// minute precision never makes a TaskAction go before maxTTL has passed.
func terminalTime(ta *flytev1.TaskAction) (time.Time, bool) {
	if at, ok := ta.Status.CompletedAt(); ok {
		return at, true
	}
	v := ta.Labels[flytev1.CompletedTimeLabel]
	if v == "" {
		return time.Time{}, false
	}
	t, err := time.ParseInLocation(flytev1.CompletedTimeLabelFormat, v, time.UTC)
	if err != nil {
		return time.Time{}, false
	}
	return t.Add(time.Minute), true
}
