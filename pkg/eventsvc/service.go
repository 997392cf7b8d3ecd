package eventsvc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/go-logr/logr"

	eventsv2 "github.com/taskaction/executor/gen/executor/events/v2"
	"github.com/taskaction/executor/gen/executor/events/v2/eventsv2connect"
	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/gen/flyteidl2/workflow/workflowconnect"
	"github.com/taskaction/executor/pkg/events"
)

const (
	// MaxRecordBatch bounds one Record call; the executor's batcher never exceeds it.
	MaxRecordBatch = events.MaxBatchLimit
	defaultPage    = 100
	maxPage        = 1000
	// watchPoll re-reads the store even without a notification, so a watcher
	// also sees events written by another replica sharing a PostgreSQL database.
	watchPoll = 2 * time.Second
	// maxReported caps how many invalid events one error lists.
	maxReported = 10
)

// Service implements Flyte's EventsProxyService (Record) and the executor's
// EventsQueryService (list and watch by run) over a Store.
type Service struct {
	store   Store
	log     logr.Logger
	subs    notifier
	metrics *recordMetrics

	endOnce sync.Once
	ended   chan struct{} // closed on shutdown: Watch streams return
}

var (
	_ workflowconnect.EventsProxyServiceHandler = (*Service)(nil)
	_ eventsv2connect.EventsQueryServiceHandler = (*Service)(nil)
)

// NewService serves store.
func NewService(store Store, log logr.Logger) *Service {
	return &Service{store: store, log: log, subs: notifier{byRun: map[string]map[chan struct{}]struct{}{}},
		ended: make(chan struct{}), metrics: newRecordMetrics()}
}

// endWatches makes every Watch stream return, now and later.
func (s *Service) endWatches() { s.endOnce.Do(func() { close(s.ended) }) }

// Record validates every event, then stores the batch in one transaction.
// Events whose identity is already stored are skipped, so a resent batch is
// harmless. An empty batch is INVALID_ARGUMENT, as at Flyte's service.
func (s *Service) Record(ctx context.Context, req *connect.Request[workflow.RecordRequest]) (*connect.Response[workflow.RecordResponse], error) {
	evs := req.Msg.GetEvents()
	counts, err := s.record(ctx, evs)
	s.metrics.record(err, counts)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&workflow.RecordResponse{}), nil
}

// record validates and stores one Record call's events, and says how many of
// them ended how (by the result label of events_service_events_total).
func (s *Service) record(ctx context.Context, evs []*workflow.ActionEvent) (map[string]int, error) {
	if len(evs) == 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("a batch holds at least one event"))
	}
	if len(evs) > MaxRecordBatch {
		return map[string]int{eventsRefused: len(evs)}, connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("a batch holds at most %d events, got %d", MaxRecordBatch, len(evs)))
	}
	var invalid []error
	bad := 0
	for i, e := range evs {
		if err := events.ValidateProto(e); err != nil {
			bad++
			if len(invalid) < maxReported {
				invalid = append(invalid, fmt.Errorf("event %d: %w", i, err))
			}
		}
	}
	if bad > 0 {
		return map[string]int{eventsRefused: len(evs)}, connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("%d of %d events are invalid, none of the batch was stored: %w", bad, len(evs), errors.Join(invalid...)))
	}
	stored, dups, err := s.store.Record(ctx, evs)
	if err != nil {
		s.log.Error(err, "storing events failed", "events", len(evs))
		return map[string]int{eventsFailed: len(evs)}, connect.NewError(connect.CodeUnavailable, fmt.Errorf("storing %d events: %w", len(evs), err))
	}
	if stored > 0 {
		runs := map[string]struct{}{}
		for _, e := range evs {
			runs[e.GetId().GetRun().GetName()] = struct{}{}
		}
		for r := range runs {
			s.subs.notify(r)
		}
	}
	return map[string]int{eventsStored: stored, eventsDuplicate: dups}, nil
}

// ListActionEvents pages through a run's (or an action's) events.
func (s *Service) ListActionEvents(ctx context.Context, req *connect.Request[eventsv2.ListActionEventsRequest]) (*connect.Response[eventsv2.ListActionEventsResponse], error) {
	m := req.Msg
	if m.GetRun() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("run is required"))
	}
	size := int(m.GetPageSize())
	switch {
	case size == 0:
		size = defaultPage
	case size > maxPage:
		size = maxPage
	}
	var after int64
	if t := m.GetPageToken(); t != "" {
		v, err := strconv.ParseInt(t, 10, 64)
		if err != nil || v < 0 {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid page token %q", t))
		}
		after = v
	}
	// One more than asked tells whether another page follows.
	got, err := s.store.List(ctx, Query{Org: m.GetOrg(), Project: m.GetProject(), Domain: m.GetDomain(), Run: m.GetRun(),
		Action: m.GetAction(), AfterSeq: after, Limit: size + 1})
	if err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	resp := &eventsv2.ListActionEventsResponse{}
	if len(got) > size {
		got = got[:size]
		resp.NextPageToken = strconv.FormatInt(got[size-1].Seq, 10)
	}
	for _, se := range got {
		resp.Events = append(resp.Events, se.Event)
	}
	return connect.NewResponse(resp), nil
}

// WatchActionEvents sends the run's stored events, then new ones as they are
// stored. It subscribes before its first read, so nothing falls in between.
func (s *Service) WatchActionEvents(ctx context.Context, req *connect.Request[eventsv2.WatchActionEventsRequest], stream *connect.ServerStream[eventsv2.WatchActionEventsResponse]) error {
	m := req.Msg
	if m.GetRun() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("run is required"))
	}
	wake := s.subs.subscribe(m.GetRun())
	defer s.subs.unsubscribe(m.GetRun(), wake)
	// Headers now: a client waits for them before its first Receive, even on a quiet run.
	if err := stream.Send(nil); err != nil {
		return fmt.Errorf("sending headers to watcher: %w", err)
	}
	poll := time.NewTicker(watchPoll)
	defer poll.Stop()
	var cursor int64
	for {
		for {
			got, err := s.store.List(ctx, Query{Org: m.GetOrg(), Project: m.GetProject(), Domain: m.GetDomain(), Run: m.GetRun(),
				AfterSeq: cursor, Limit: maxPage})
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return connect.NewError(connect.CodeUnavailable, err)
			}
			for _, se := range got {
				if err := stream.Send(&eventsv2.WatchActionEventsResponse{Event: se.Event}); err != nil {
					return fmt.Errorf("sending to watcher: %w", err)
				}
				cursor = se.Seq
			}
			if len(got) < maxPage {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.ended:
			return connect.NewError(connect.CodeUnavailable, errors.New("events service shutting down"))
		case <-wake:
		case <-poll.C:
		}
	}
}

// notifier wakes the watchers of a run. A wake-up is a one-slot signal: the
// watcher re-reads the store from its cursor, so a slow watcher misses nothing.
type notifier struct {
	mu    sync.Mutex
	byRun map[string]map[chan struct{}]struct{}
}

func (n *notifier) subscribe(run string) chan struct{} {
	c := make(chan struct{}, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byRun[run] == nil {
		n.byRun[run] = map[chan struct{}]struct{}{}
	}
	n.byRun[run][c] = struct{}{}
	return c
}

func (n *notifier) unsubscribe(run string, c chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.byRun[run], c)
	if len(n.byRun[run]) == 0 {
		delete(n.byRun, run)
	}
}

func (n *notifier) notify(run string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.byRun[run] {
		select {
		case c <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}
