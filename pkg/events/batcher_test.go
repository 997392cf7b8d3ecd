package events_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/eventsvc"
	"github.com/taskaction/executor/pkg/eventsvc/eventsvctest"
)

func event(run string, i int) events.Event {
	return events.Event{
		Project: "p", Domain: "d", Run: run, Action: fmt.Sprintf("a%d", i),
		Attempt: 1, Phase: events.PhaseRunning, Version: 0,
		UpdatedAt: time.Unix(1700000000, int64(i)),
	}
}

// startBatcher runs b until the test ends and checks that Start returns.
func startBatcher(t testing.TB, b *events.Batcher) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("batcher: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("batcher did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// The service on each store: SQLite (the default) and PostgreSQL.
func TestBatcherConcurrentEventsExactlyOnce(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) { testConcurrentExactlyOnce(t, backend) })
	}
}

func testConcurrentExactlyOnce(t *testing.T, backend string) {
	var svcOpts eventsvctest.Options
	if backend == "postgres" {
		st, err := eventsvc.OpenPostgres(context.Background(), eventsvctest.StartPostgres(t))
		if err != nil {
			t.Fatal(err)
		}
		svcOpts.Store = st
	}
	srv := eventsvctest.Start(t, svcOpts)
	opts := events.BatcherOptions{MaxBatch: 100, MaxDelay: 20 * time.Millisecond, MaxInFlight: 2}
	b := events.NewBatcher(events.NewClient(srv.URL, nil), opts)
	startBatcher(t, b)

	const n = 1000
	errs := make(chan error, n)
	var start sync.WaitGroup
	start.Add(1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start.Wait()
			errs <- b.Record(context.Background(), event("run", i))
		})
	}
	start.Done()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("record: %v", err)
		}
	}
	got, err := srv.Store.All(context.Background(), "run")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, se := range got {
		seen[se.Event.GetId().GetName()]++
	}
	for i := range n {
		if c := seen[fmt.Sprintf("a%d", i)]; c != 1 {
			t.Fatalf("event a%d stored %d times", i, c)
		}
	}
	stored, dups := srv.Store.Counts()
	sizes := srv.Store.BatchSizes()
	st := b.Stats()
	t.Logf("%d events in %d Record calls, sizes %v, stats %+v", n, len(sizes), sizes, st)
	if stored != n || dups != 0 {
		t.Errorf("stored %d, duplicates %d: each event must reach the service once", stored, dups)
	}
	for _, s := range sizes {
		if s > opts.MaxBatch {
			t.Errorf("a batch of %d events is over MaxBatch %d", s, opts.MaxBatch)
		}
	}
	// 1000/100 = 10 full batches at best; allow for batches cut short by the delay.
	if len(sizes) > 40 {
		t.Errorf("%d Record calls for %d events: too few events per call", len(sizes), n)
	}
	if m := srv.MaxConcurrentRecords(); m > opts.MaxInFlight {
		t.Errorf("%d Record calls in flight at once, MaxInFlight %d", m, opts.MaxInFlight)
	}
	if st.Calls != uint64(len(sizes)) || st.Events != n || st.Retries != 0 {
		t.Errorf("stats %+v disagree with the service (%d calls)", st, len(sizes))
	}
}

func TestBatcherBoundsInFlight(t *testing.T) {
	// A slow service makes batches pile up behind the in-flight bound.
	srv := eventsvctest.Start(t, eventsvctest.Options{RecordDelay: 30 * time.Millisecond})
	opts := events.BatcherOptions{MaxBatch: 10, MaxDelay: time.Millisecond, MaxInFlight: 3}
	b := events.NewBatcher(events.NewClient(srv.URL, nil), opts)
	startBatcher(t, b)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if err := b.Record(context.Background(), event("run", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if m := srv.MaxConcurrentRecords(); m > opts.MaxInFlight || m < 2 {
		t.Errorf("max concurrent Record calls %d, want 2..%d", m, opts.MaxInFlight)
	}
	for _, s := range srv.Store.BatchSizes() {
		if s > opts.MaxBatch {
			t.Errorf("batch of %d over MaxBatch %d", s, opts.MaxBatch)
		}
	}
}

func TestBatcherErrors(t *testing.T) {
	noRetry := events.RetryOptions{MaxAttempts: 1}
	fastRetry := events.RetryOptions{MaxAttempts: 4, InitialBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	cases := []struct {
		name string
		// breaks the service before the events are recorded
		fault       func(*eventsvctest.Instance)
		retry       events.RetryOptions
		wantErr     bool
		wantCalls   uint64 // Record attempts by the batcher for the one batch
		wantStored  int
		wantRetries uint64
	}{
		{"503 without retries fans out to every caller", func(s *eventsvctest.Instance) { s.SetFailing(true) }, noRetry, true, 1, 0, 0},
		{"503 until retries run out", func(s *eventsvctest.Instance) { s.SetFailing(true) }, fastRetry, true, 4, 0, 3},
		{"transient 503s are retried", func(s *eventsvctest.Instance) { s.FailNext(2) }, fastRetry, false, 3, 10, 2},
		{"service down (connection refused) fans out", func(s *eventsvctest.Instance) { s.Stop() }, fastRetry, true, 4, 0, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := eventsvctest.Start(t, eventsvctest.Options{})
			tc.fault(srv)
			// A long delay puts all ten events in one batch.
			b := events.NewBatcher(events.NewClient(srv.URL, nil), events.BatcherOptions{MaxBatch: 10, MaxDelay: time.Second, MaxIdle: -1, Retry: tc.retry})
			startBatcher(t, b)
			errs := make(chan error, 10)
			var wg sync.WaitGroup
			for i := range 10 {
				wg.Go(func() { errs <- b.Record(context.Background(), event("run", i)) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if tc.wantErr != (err != nil) {
					t.Fatalf("caller got %v, want error: %v", err, tc.wantErr)
				}
				if err != nil && !events.Retryable(err) {
					t.Errorf("an outage must look transient to the caller: %v", err)
				}
			}
			st := b.Stats()
			if st.Batches != 1 || st.Calls != tc.wantCalls || st.Retries != tc.wantRetries {
				t.Errorf("stats %+v, want 1 batch, %d calls, %d retries", st, tc.wantCalls, tc.wantRetries)
			}
			if stored, _ := srv.Store.Counts(); stored != tc.wantStored {
				t.Errorf("stored %d, want %d", stored, tc.wantStored)
			}
		})
	}
}

func TestBatcherRecoversAfterOutage(t *testing.T) {
	srv := eventsvctest.Start(t, eventsvctest.Options{})
	b := events.NewBatcher(events.NewClient(srv.URL, nil), events.BatcherOptions{
		Retry: events.RetryOptions{MaxAttempts: 2, InitialBackoff: time.Millisecond}})
	startBatcher(t, b)
	ctx := context.Background()
	if err := b.Record(ctx, event("run", 1)); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := b.Record(ctx, event("run", 2)); err == nil {
		t.Fatal("recorded while the service was down")
	}
	srv.Resume()
	// The reconcile that failed retries the same event; the service stores it once.
	for _, i := range []int{2, 2, 3} {
		if err := b.Record(ctx, event("run", i)); err != nil {
			t.Fatalf("after resume: %v", err)
		}
	}
	if stored, dups := srv.Store.Counts(); stored != 3 || dups != 1 {
		t.Fatalf("stored %d, duplicates %d; want 3 and 1", stored, dups)
	}
}

func TestBatcherCancelledCallerReturnsAtOnce(t *testing.T) {
	srv := eventsvctest.Start(t, eventsvctest.Options{})
	release := srv.Hold()
	defer release()
	b := events.NewBatcher(events.NewClient(srv.URL, nil), events.BatcherOptions{MaxDelay: time.Millisecond})
	startBatcher(t, b)

	cases := []struct {
		name   string
		cancel func(context.CancelFunc)
	}{
		{"already cancelled", func(c context.CancelFunc) { c() }},
		{"cancelled while its batch is in flight", func(c context.CancelFunc) { time.AfterFunc(50*time.Millisecond, c) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tc.cancel(cancel)
			start := time.Now()
			err := b.Record(ctx, event("run", 1))
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("returned after %v", d)
			}
		})
	}
	// A caller with a deadline gets DeadlineExceeded, not a wait for the held call.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := b.Record(ctx, event("run", 2)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want DeadlineExceeded", err)
	}
}

func TestBatcherCancelledBeforeStart(t *testing.T) {
	// Nothing runs the batcher: a caller must still be able to give up.
	b := events.NewBatcher(events.NewClient("http://127.0.0.1:1", nil), events.BatcherOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Record(ctx, event("run", 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

func TestBatcherQueueBound(t *testing.T) {
	// Unstarted, the queue fills; the next caller blocks until its context ends.
	b := events.NewBatcher(events.NewClient("http://127.0.0.1:1", nil), events.BatcherOptions{QueueSize: 2})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { _ = b.Record(ctx, event("run", i)) })
	}
	time.Sleep(20 * time.Millisecond)
	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if err := b.Record(short, event("run", 3)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("full queue: %v", err)
	}
	cancel()
	wg.Wait()
}

func TestBatcherInvalidEventFailsAlone(t *testing.T) {
	srv := eventsvctest.Start(t, eventsvctest.Options{})
	b := events.NewBatcher(events.NewClient(srv.URL, nil), events.BatcherOptions{MaxDelay: 50 * time.Millisecond})
	startBatcher(t, b)
	bad := event("run", 0)
	bad.Attempt = 0
	var wg sync.WaitGroup
	var goodErr, badErr error
	wg.Go(func() { goodErr = b.Record(context.Background(), event("run", 1)) })
	wg.Go(func() { badErr = b.Record(context.Background(), bad) })
	wg.Wait()
	if !errors.Is(badErr, events.ErrInvalidEvent) || events.Retryable(badErr) {
		t.Errorf("invalid event: %v", badErr)
	}
	if goodErr != nil {
		t.Errorf("a valid event in the same window failed: %v", goodErr)
	}
}

func TestBatcherStop(t *testing.T) {
	srv := eventsvctest.Start(t, eventsvctest.Options{})
	release := srv.Hold()
	b := events.NewBatcher(events.NewClient(srv.URL, nil), events.BatcherOptions{MaxDelay: time.Millisecond, MaxInFlight: 1, MaxBatch: 1})
	stop := startBatcher(t, b)
	inFlight := make(chan error, 1)
	go func() { inFlight <- b.Record(context.Background(), event("run", 1)) }()
	time.Sleep(50 * time.Millisecond) // event 1 is now held in flight
	queued := make(chan error, 1)
	go func() { queued <- b.Record(context.Background(), event("run", 2)) }()
	time.Sleep(50 * time.Millisecond)
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	if err := <-queued; !errors.Is(err, events.ErrStopped) {
		t.Errorf("queued event: %v, want ErrStopped", err)
	}
	release()
	<-stopped
	// The in-flight call was allowed to finish, and its caller told the truth.
	if err := <-inFlight; err != nil {
		t.Errorf("in-flight event: %v, want nil (it was stored)", err)
	}
	if err := b.Record(context.Background(), event("run", 3)); !errors.Is(err, events.ErrStopped) {
		t.Errorf("after stop: %v", err)
	}
	if stored, _ := srv.Store.Counts(); stored != 1 {
		t.Errorf("stored %d, want 1", stored)
	}
}

func TestRetryable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{connect.NewError(connect.CodeUnavailable, errors.New("x")), true},
		{connect.NewError(connect.CodeDeadlineExceeded, errors.New("x")), true},
		{connect.NewError(connect.CodeInternal, errors.New("x")), true},
		{connect.NewError(connect.CodeCanceled, errors.New("broken pipe")), true},
		{connect.NewError(connect.CodeInvalidArgument, errors.New("x")), false},
		{connect.NewError(connect.CodeUnimplemented, errors.New("x")), false},
		{connect.NewError(connect.CodePermissionDenied, errors.New("x")), false},
		{fmt.Errorf("wrapped: %w", events.ErrInvalidEvent), false},
		{errors.New("plain transport error"), true},
	}
	for _, tc := range cases {
		if got := events.Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestBatcherDelay(t *testing.T) {
	srv := eventsvctest.Start(t, eventsvctest.Options{})
	cases := []struct {
		name     string
		opts     events.BatcherOptions
		min, max time.Duration
		phase    events.Phase // default RUNNING
	}{
		{"a lone event goes once the queue is idle", events.BatcherOptions{MaxDelay: time.Second, MaxIdle: 5 * time.Millisecond}, 0, 500 * time.Millisecond, ""},
		{"without MaxIdle it waits out MaxDelay", events.BatcherOptions{MaxDelay: 300 * time.Millisecond, MaxIdle: -1}, 300 * time.Millisecond, 5 * time.Second, ""},
		{"a full batch does not wait", events.BatcherOptions{MaxBatch: 1, MaxDelay: time.Second, MaxIdle: -1}, 0, 500 * time.Millisecond, ""},
		{"while saturated a batch waits out SaturatedDelay, not MaxIdle", events.BatcherOptions{MaxDelay: time.Millisecond, MaxIdle: time.Millisecond,
			Saturated: func() bool { return true }, SaturatedDelay: 300 * time.Millisecond}, 300 * time.Millisecond, 5 * time.Second, ""},
		{"otherwise MaxIdle and MaxDelay", events.BatcherOptions{MaxDelay: time.Second, MaxIdle: 5 * time.Millisecond,
			Saturated: func() bool { return false }, SaturatedDelay: time.Minute}, 0, 5 * time.Second, ""},
		{"a completion's event is not held while saturated", events.BatcherOptions{MaxDelay: time.Second, MaxIdle: 5 * time.Millisecond,
			Saturated: func() bool { return true }, SaturatedDelay: time.Minute}, 0, 30 * time.Second, events.PhaseSucceeded},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := events.NewBatcher(events.NewClient(srv.URL, nil), tc.opts)
			startBatcher(t, b)
			ev := event(fmt.Sprintf("delay-%d", i), 1)
			if tc.phase != "" {
				ev.Phase = tc.phase
			}
			start := time.Now()
			if err := b.Record(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < tc.min || d > tc.max {
				t.Errorf("acknowledged after %v, want %v..%v", d, tc.min, tc.max)
			}
		})
	}
}

func TestBatcherMetrics(t *testing.T) {
	srv := eventsvctest.Start(t, eventsvctest.Options{})
	b := events.NewBatcher(events.NewClient(srv.URL, nil), events.BatcherOptions{})
	startBatcher(t, b)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(b)
	for i := range 3 {
		if err := b.Record(context.Background(), event("metrics", i)); err != nil {
			t.Fatal(err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		m := f.GetMetric()[0]
		got[f.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	if got["executor_events_acknowledged_total"] != 3 || got["executor_events_record_calls_total"] < 1 || len(got) != 6 {
		t.Errorf("metrics %v", got)
	}
}

// While the executor is saturated, events that arrive further apart than
// MaxIdle still share one Record call.
func TestBatcherHoldsBatchesWhileSaturated(t *testing.T) {
	srv := eventsvctest.Start(t, eventsvctest.Options{})
	b := events.NewBatcher(events.NewClient(srv.URL, nil), events.BatcherOptions{MaxBatch: 3, MaxIdle: time.Millisecond,
		Saturated: func() bool { return true }, SaturatedDelay: time.Minute})
	startBatcher(t, b)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if err := b.Record(context.Background(), event("saturated", i)); err != nil {
				t.Error(err)
			}
		})
		time.Sleep(20 * time.Millisecond) // well past MaxIdle
	}
	wg.Wait()
	if got := srv.Store.BatchSizes(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("batch sizes %v, want one batch of 3", got)
	}
}

// A completion's event is not held while saturated, nor are the events
// already waiting in the batch it joins. Both are queued before the batcher
// starts, the running event first, so that it begins the held batch.
func TestBatcherDoesNotHoldCompletions(t *testing.T) {
	srv := eventsvctest.Start(t, eventsvctest.Options{})
	b := events.NewBatcher(events.NewClient(srv.URL, nil), events.BatcherOptions{MaxIdle: time.Millisecond,
		Saturated: func() bool { return true }, SaturatedDelay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	running, done := event("completions", 0), event("completions", 1)
	done.Phase = events.PhaseSucceeded
	heldErr, doneErr := make(chan error, 1), make(chan error, 1)
	go func() { heldErr <- b.Record(ctx, running) }()
	waitForQueue(t, b, 1)
	go func() { doneErr <- b.Record(ctx, done) }()
	waitForQueue(t, b, 2)
	startBatcher(t, b)
	if err := <-doneErr; err != nil {
		t.Fatalf("terminal event: %v (held for SaturatedDelay?)", err)
	}
	if err := <-heldErr; err != nil {
		t.Fatalf("the event waiting in the batch: %v (still held?)", err)
	}
}

// waitForQueue waits until n events wait in b's queue (its queue-length gauge).
func waitForQueue(t *testing.T, b *events.Batcher, n int) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(b)
	deadline := time.Now().Add(time.Minute)
	for {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "executor_events_queue_length" && int(f.GetMetric()[0].GetGauge().GetValue()) == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events never queued", n)
		}
		time.Sleep(time.Millisecond)
	}
}
