package events

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/gen/flyteidl2/workflow/workflowconnect"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/tracing"
)

// ErrStopped is returned by Record once the Batcher has stopped, and to callers
// whose events were still queued when it stopped.
var ErrStopped = errors.New("events batcher stopped")

// MaxBatchLimit is the most events the events service takes in one Record call.
const MaxBatchLimit = 5000

// RetryOptions bound the retries of one batch's Record call on transient errors.
type RetryOptions struct {
	// MaxAttempts counts the first call; 1 disables retries. Default 4.
	MaxAttempts int
	// InitialBackoff doubles after each failed attempt up to MaxBackoff, with
	// jitter so that batches failing together do not retry together.
	// Defaults 50ms and 1s.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// BatcherOptions bound the Batcher. Zero values take the defaults.
type BatcherOptions struct {
	// MaxBatch is the most events in one Record call. Default 200, at most MaxBatchLimit.
	MaxBatch int
	// MaxDelay is how long the first event of a batch waits for others before
	// the batch may go out. Default 10ms: a reconcile waits about this plus
	// one RPC for its acknowledgement.
	MaxDelay time.Duration
	// MaxIdle lets a batch go out before MaxDelay once no event has arrived
	// for this long: when callers come in bursts (64 reconciles acknowledged
	// together send their next events together) nobody waits out MaxDelay.
	// Default 2ms; negative: wait for MaxDelay or MaxBatch only.
	MaxIdle time.Duration
	// Saturated, when set, says whether the executor is short of capacity.
	// A batch begun while it is waits SaturatedDelay for more events, without
	// MaxIdle: each Record call costs the events service (and its database)
	// far more than an event in it, and the reconciles that wait longer for
	// their acknowledgement would wait for CPU anyway. Measured on the bench
	// rig (N=2000, QPS 1000, three runs each): 414 Record calls per 1,000
	// events became 121 and the events service's CPU halved (4.4 → 2.0 s),
	// for completions p50 65 → 136 ms. A terminal event is not held: the batch
	// it joins goes out as when not saturated (completions first).
	Saturated func() bool
	// SaturatedDelay replaces MaxDelay for a batch begun while Saturated.
	// Default 60ms.
	SaturatedDelay time.Duration
	// QueueSize bounds events accepted but not yet in a batch; Record blocks
	// (until its context is done) when the queue is full. Default 4096.
	QueueSize int
	// MaxInFlight bounds concurrent Record calls. While all are busy, the next
	// batch keeps filling up to MaxBatch. Default 4.
	MaxInFlight int
	// CallTimeout bounds one Record call attempt. Default 5s, so that with the
	// default retries a hung service fails a caller within about 20s.
	CallTimeout time.Duration
	Retry       RetryOptions
	// TracerProvider, when it makes spans, gives each Record call a span
	// (a child of the caller's) and each batch's RPC one whose parent is
	// one of its callers' spans, linked to the others (and they to it).
	// Nil: no spans. The client (NewClient) needs tracing.ClientOptions for
	// the trace to reach the service.
	TracerProvider trace.TracerProvider
}

func (o BatcherOptions) withDefaults() BatcherOptions {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxBatch, 200)
	o.MaxBatch = min(o.MaxBatch, MaxBatchLimit)
	defDur(&o.MaxDelay, 10*time.Millisecond)
	if o.MaxIdle == 0 {
		o.MaxIdle = 2 * time.Millisecond
	}
	defDur(&o.SaturatedDelay, 60*time.Millisecond)
	def(&o.QueueSize, 4096)
	def(&o.MaxInFlight, 4)
	defDur(&o.CallTimeout, 5*time.Second)
	def(&o.Retry.MaxAttempts, 4)
	defDur(&o.Retry.InitialBackoff, 50*time.Millisecond)
	defDur(&o.Retry.MaxBackoff, time.Second)
	if o.Retry.MaxBackoff < o.Retry.InitialBackoff {
		o.Retry.MaxBackoff = o.Retry.InitialBackoff
	}
	return o
}

// BatcherStats are counters since the Batcher was made.
type BatcherStats struct {
	Calls         uint64 // Record RPC attempts, retries included
	Batches       uint64 // batches sent (each one or more attempts)
	Events        uint64 // events acknowledged by the service
	Retries       uint64
	FailedBatches uint64 // batches whose callers got an error
	Abandoned     uint64 // events dropped unsent because their caller had gone
}

// Batcher coalesces the events of concurrent callers into few Record calls.
// It implements Recorder, and manager.Runnable through Start.
type Batcher struct {
	client workflowconnect.EventsProxyServiceClient
	opts   BatcherOptions
	tracer tracing.Tracer

	queue   chan *pending
	stopped chan struct{} // closed when Start's context is done
	exited  chan struct{} // closed when nothing will answer a pending any more
	started atomic.Bool

	calls, batches, events, retries, failed, abandoned atomic.Uint64
}

type pending struct {
	ctx      context.Context
	ev       *workflow.ActionEvent
	terminal bool       // a completion's event: its batch is not held
	done     chan error // buffered: the sender never blocks on a caller that left
	span     trace.Span // the Record call's; nil when not traced
}

var _ Recorder = (*Batcher)(nil)

// NewBatcher is a Batcher sending to client (see NewClient). Events recorded
// before Start wait in the queue; Start sends them.
func NewBatcher(client workflowconnect.EventsProxyServiceClient, opts BatcherOptions) *Batcher {
	opts = opts.withDefaults()
	return &Batcher{
		client:  client,
		opts:    opts,
		tracer:  tracing.NewTracer(opts.TracerProvider, "executor/events"),
		queue:   make(chan *pending, opts.QueueSize),
		stopped: make(chan struct{}),
		exited:  make(chan struct{}),
	}
}

// Options are the effective options, defaults applied.
func (b *Batcher) Options() BatcherOptions { return b.opts }

// Stats reads the counters.
func (b *Batcher) Stats() BatcherStats {
	return BatcherStats{
		Calls: b.calls.Load(), Batches: b.batches.Load(), Events: b.events.Load(),
		Retries: b.retries.Load(), FailedBatches: b.failed.Load(), Abandoned: b.abandoned.Load(),
	}
}

// Record sends ev in the next batch and returns when the service has stored
// the batch (nil), when it failed after retries or is invalid (an error: the
// state change is not reported), or at once when ctx is done (ctx.Err()).
// An event whose caller has gone before its batch is sent is not sent.
func (b *Batcher) Record(ctx context.Context, ev Event) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	var span trace.Span
	if b.tracer.On() {
		ctx, span = b.tracer.Start(ctx, "events.Record")
		if span.IsRecording() {
			span.SetAttributes(attrRun.String(ev.Run), attrAction.String(ev.Action), attrAttempt.Int64(int64(ev.Attempt)),
				attrPhase.String(string(ev.Phase)), attrVersion.Int64(int64(ev.Version)))
		}
		defer func() { tracing.End(span, err) }()
	}
	if ev.ReportedAt.IsZero() {
		ev.ReportedAt = time.Now()
	}
	p, err := ToProto(ev)
	if err != nil {
		return err
	}
	pd := &pending{ctx: ctx, ev: p, terminal: ev.Phase.Terminal(), done: make(chan error, 1), span: span}
	select {
	case <-b.stopped:
		return ErrStopped
	default:
	}
	select {
	case b.queue <- pd:
	case <-ctx.Done():
		return ctx.Err()
	case <-b.stopped:
		return ErrStopped
	}
	select {
	case err := <-pd.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-b.exited:
		// Enqueued while stopping: nobody will send it, unless the final drain answered it.
		select {
		case err := <-pd.done:
			return err
		default:
			return ErrStopped
		}
	}
}

// NeedLeaderElection is false: the Batcher must run wherever reconciles may call it.
func (b *Batcher) NeedLeaderElection() bool { return false }

// Start collects and sends batches until ctx is done. Then it fails queued
// events with ErrStopped, lets in-flight calls finish (without further
// retries) so their callers learn the truth, and returns.
func (b *Batcher) Start(ctx context.Context) error {
	if !b.started.CompareAndSwap(false, true) {
		return errors.New("events batcher: Start called twice")
	}
	// In-flight calls outlive ctx, bounded by CallTimeout: a stored batch must be acknowledged.
	sendCtx := context.WithoutCancel(ctx)
	sem := make(chan struct{}, b.opts.MaxInFlight)
	var wg sync.WaitGroup
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()

	var batch []*pending
	var timerC, idleC <-chan time.Time
	// ready: the batch may go out (its delay or idle time is over);
	// held: it was begun while saturated, so only its delay counts, until
	// a terminal event joins it.
	ready, held := false, false
	var due time.Time // when the batch's delay ends
loop:
	for {
		var queueC <-chan *pending
		if len(batch) < b.opts.MaxBatch {
			queueC = b.queue
		}
		var semC chan<- struct{}
		if len(batch) > 0 && (ready || len(batch) >= b.opts.MaxBatch) {
			semC = sem
		}
		select {
		case <-ctx.Done():
			break loop
		case p := <-queueC:
			batch = append(batch, p)
			if len(batch) == 1 {
				held = !p.terminal && b.opts.Saturated != nil && b.opts.Saturated()
				delay := b.opts.MaxDelay
				if held {
					delay = b.opts.SaturatedDelay
				}
				due = time.Now().Add(delay)
				timer.Reset(delay)
				timerC = timer.C
			} else if held && p.terminal {
				held = false
				if !ready {
					timer.Reset(min(time.Until(due), b.opts.MaxDelay))
				}
			}
			if b.opts.MaxIdle > 0 && !ready && !held {
				idle.Reset(b.opts.MaxIdle)
				idleC = idle.C
			}
		case <-timerC:
			ready, timerC, idleC = true, nil, nil
		case <-idleC:
			ready, timerC, idleC = true, nil, nil
		case semC <- struct{}{}:
			out := batch
			batch, ready, timerC, idleC = nil, false, nil, nil
			timer.Stop()
			idle.Stop()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				b.send(ctx, sendCtx, out)
			}()
		}
	}
	close(b.stopped)
	b.fail(batch, ErrStopped)
	b.drain()
	wg.Wait()
	b.drain() // Records that raced with close(stopped)
	close(b.exited)
	return nil
}

func (b *Batcher) drain() {
	for {
		select {
		case p := <-b.queue:
			p.done <- ErrStopped
		default:
			return
		}
	}
}

func (b *Batcher) fail(ps []*pending, err error) {
	for _, p := range ps {
		p.done <- err
	}
}

// send makes one batch durable, retrying transient errors, and answers every
// caller of the batch with the same result.
func (b *Batcher) send(stopCtx, sendCtx context.Context, batch []*pending) {
	live := batch[:0]
	for _, p := range batch {
		if p.ctx.Err() != nil {
			b.abandoned.Add(1) // its caller already returned ctx.Err()
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	req := &workflow.RecordRequest{Events: make([]*workflow.ActionEvent, len(live))}
	for i, p := range live {
		req.Events[i] = p.ev
	}
	b.batches.Add(1)
	start := time.Now()
	var err error
	var span trace.Span
	if b.tracer.On() {
		sendCtx, span = b.batchSpan(sendCtx, live)
	}
	attempt := 1
	for ; ; attempt++ {
		callCtx, cancel := context.WithTimeout(sendCtx, b.opts.CallTimeout)
		_, err = b.client.Record(callCtx, connect.NewRequest(req))
		cancel()
		b.calls.Add(1)
		if err == nil || !Retryable(err) || attempt >= b.opts.Retry.MaxAttempts {
			break
		}
		if allGone(live) {
			err = fmt.Errorf("every caller left: %w", err)
			break
		}
		b.retries.Add(1)
		t := time.NewTimer(b.backoff(attempt))
		select {
		case <-t.C:
			continue
		case <-stopCtx.Done():
			t.Stop()
			err = fmt.Errorf("%w while retrying: %w", ErrStopped, err)
		}
		break
	}
	metrics.EventBatch(len(live), time.Since(start), err)
	if span != nil {
		if span.IsRecording() {
			span.SetAttributes(attrCalls.Int(attempt))
		}
		tracing.End(span, err)
	}
	if err != nil {
		b.failed.Add(1)
		err = fmt.Errorf("recording a batch of %d events at the events service: %w", len(live), err)
	} else {
		b.events.Add(uint64(len(live)))
	}
	b.fail(live, err)
}

// Attributes of the events spans.
const (
	attrRun     = attribute.Key("flyte.run")
	attrAction  = attribute.Key("flyte.action")
	attrAttempt = attribute.Key("event.attempt")
	attrPhase   = attribute.Key("event.phase")
	attrVersion = attribute.Key("event.version")
	attrCount   = attribute.Key("events.count")
	attrCalls   = attribute.Key("rpc.attempts")
)

// batchSpan starts the span of a batch's RPC. Its parent is a caller's
// Record span (a sampled one if any, so the batch is kept with it); the
// other callers' spans are linked to it and it to them, so that each
// TaskAction's trace leads to the call that carried its event to the
// service, and the service's spans.
func (b *Batcher) batchSpan(ctx context.Context, live []*pending) (context.Context, trace.Span) {
	parent := -1
	for i, p := range live {
		if p.span == nil || !p.span.SpanContext().IsValid() {
			continue
		}
		if parent < 0 || (!live[parent].span.SpanContext().IsSampled() && p.span.SpanContext().IsSampled()) {
			parent = i
		}
	}
	var links []trace.Link
	for i, p := range live {
		if i != parent && p.span != nil && p.span.SpanContext().IsValid() {
			links = append(links, trace.Link{SpanContext: p.span.SpanContext()})
		}
	}
	if parent >= 0 {
		ctx = trace.ContextWithSpanContext(ctx, live[parent].span.SpanContext())
	}
	ctx, span := b.tracer.Start(ctx, "events.RecordBatch", trace.WithLinks(links...),
		trace.WithAttributes(attrCount.Int(len(live))))
	for i, p := range live {
		if i != parent && p.span != nil {
			p.span.AddLink(trace.Link{SpanContext: span.SpanContext()})
		}
	}
	return ctx, span
}

func allGone(ps []*pending) bool {
	for _, p := range ps {
		if p.ctx.Err() == nil {
			return false
		}
	}
	return true
}

// backoff before attempt+1: exponential, capped, and jittered in [d/2, d).
func (b *Batcher) backoff(attempt int) time.Duration {
	d := b.opts.Retry.InitialBackoff
	for i := 1; i < attempt && d < b.opts.Retry.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, b.opts.Retry.MaxBackoff)
	half := d / 2
	return half + rand.N(d-half+1)
}

// Retryable tells whether a Record error may pass on its own. The service is
// idempotent, so resending a batch that was in fact stored is harmless.
// Canceled counts: connect-go reports a connection the server closed or reset
// mid-write as Canceled, and the Batcher never cancels its own calls.
func Retryable(err error) bool {
	if errors.Is(err, ErrInvalidEvent) {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeResourceExhausted,
		connect.CodeAborted, connect.CodeInternal, connect.CodeUnknown, connect.CodeCanceled:
		return true
	}
	return false
}
