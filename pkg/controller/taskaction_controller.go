// Package controller holds the TaskAction reconciler: it turns a TaskAction
// into attempts run by plugins, follows them to the end, and reports every
// transition before it persists it.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kevents "k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// Kubernetes Event reasons (all Warning).
const (
	EventFailedValidation        = "FailedValidation"
	EventFailedPluginResolve     = "FailedPluginResolve"
	EventFailedPluginHandle      = "FailedPluginHandle"
	EventActionEventPublishError = "ActionEventPublishFailed"
)

// Options tune the reconciler; they come from the executor's Config.
type Options struct {
	Cluster           string
	MaxSystemFailures int32
	RequeueDuration   time.Duration
	Settings          plugin.Settings
}

// Reconciler reconciles TaskActions.
type Reconciler struct {
	// Client reads from the informer cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server; used only to confirm that a pod the
	// cache does not show is really gone.
	APIReader client.Reader
	Registry  *plugin.Registry
	Recorder  events.Recorder
	// Cache is the task-output cache; nil disables it.
	Cache cache.Client
	// KubeEvents emits Kubernetes Events; may be nil.
	KubeEvents kevents.EventRecorder
	Options    Options
	Clock      clock.PassiveClock

	writes *writeTracker
}

// +kubebuilder:rbac:groups=flyte.org,resources=taskactions,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=flyte.org,resources=taskactions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flyte.org,resources=taskactions/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile recomputes one TaskAction from what the API server says.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ta := &flytev1.TaskAction{}
	if err := r.Client.Get(ctx, req.NamespacedName, ta); err != nil {
		if apierrors.IsNotFound(err) {
			r.writes.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	// A reconcile that reads an object older than our own last write would
	// recompute (and re-report) what is already done: wait for the cache.
	if r.writes.stale(req.NamespacedName, ta.ResourceVersion) {
		return ctrl.Result{RequeueAfter: 250 * time.Millisecond}, nil
	}

	if !ta.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, ta)
	}
	if IsTerminal(ta) {
		return ctrl.Result{}, r.ensureTerminalMetadata(ctx, ta)
	}
	if ta.Spec.ActionType == flytev1.ActionTypeCondition {
		// Conditions are resolved by signals from the actions service; the
		// executor has nothing to run for them.
		return ctrl.Result{}, nil
	}

	if missing := validateSpec(ta); len(missing) > 0 {
		return r.failBeforeStart(ctx, ta, flytev1.ReasonInvalidSpec, CodeInvalidSpec, EventFailedValidation, missingFieldsMessage(missing))
	}
	p, err := r.Registry.Resolve(ta.Spec.TaskType)
	if err != nil {
		return r.failBeforeStart(ctx, ta, flytev1.ReasonPluginNotFound, CodePluginNotFound, EventFailedPluginResolve, err.Error())
	}

	if !controllerutil.ContainsFinalizer(ta, Finalizer) {
		if err := r.patchMeta(ctx, ta, func(o *flytev1.TaskAction) { controllerutil.AddFinalizer(o, Finalizer) }); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	return r.run(ctx, ta, p)
}

// run advances the current attempt by one step.
func (r *Reconciler) run(ctx context.Context, ta *flytev1.TaskAction, p plugin.Plugin) (ctrl.Result, error) {
	now := r.Clock.Now()
	st := ta.Status.DeepCopy()
	if st.Attempts < 1 {
		st.Attempts = 1
	}
	if st.SystemRetryAt != nil && now.Before(st.SystemRetryAt.Time) {
		return ctrl.Result{RequeueAfter: st.SystemRetryAt.Sub(now)}, nil
	}
	tc := r.taskContext(ta, st.Attempts)
	if st.PodName == "" {
		if res, err := r.cacheBeforeLaunch(ctx, ta, st, now); res != nil || err != nil {
			return ptrResult(res), err
		}
	}

	obs, err := r.observe(ctx, ta, st, p, tc, now)
	if err != nil {
		return r.systemFailure(ctx, ta, st, p, tc, &plugin.ExecError{Code: CodeSystemError, Kind: flytev1.ErrorKindSystem, Message: err.Error()}, false, now)
	}
	if obs == nil { // waiting for something the watch will tell us about
		return ctrl.Result{}, nil
	}
	if obs.Phase.IsTerminal() && obs.Phase != plugin.PhaseSucceeded && obs.Error == nil {
		obs.Error = &plugin.ExecError{Code: "UnknownError", Kind: flytev1.ErrorKindUser, Message: obs.Message}
	}
	var requeue time.Duration
	if obs.Progressed {
		st.SystemFailures = 0
	}

	var evs []events.Event
	var names []string // phase-history names of the recorded transitions
	var after []string // pods of finished attempts to delete once the status is persisted
	switch {
	case obs.Phase == plugin.PhaseRetryableFailure && obs.Error != nil && obs.Error.Kind == flytev1.ErrorKindSystem:
		return r.systemFailure(ctx, ta, st, p, tc, obs.Error, true, now)

	case obs.Phase == plugin.PhaseRetryableFailure && st.Attempts < maxAttempts(ta):
		// A user failure with attempts left: report the failed attempt, start the next one.
		failed := transition{phase: plugin.PhaseRetryableFailure, err: obs.Error, at: at(obs, now), message: obs.Error.Message}
		st.PluginPhaseVersion = nextVersion(ta.Status, st.Attempts)
		evs = append(evs, r.event(ta, st, failed))
		names = append(names, historyName(failed))
		applyTransition(st, failed, ta.Generation)
		after = append(after, st.PodName)
		st.Attempts++
		metrics.Retry()
		st.PluginPhaseVersion = 0
		st.PodName = ""
		st.AttemptStartedAt = nil
		st.PluginState = ""
		tc = r.taskContext(ta, st.Attempts)
		next, err := r.observe(ctx, ta, st, p, tc, now)
		if err != nil || next == nil || next.Phase.IsTerminal() {
			// The next attempt launches (or fails) on the next reconcile; persist this failure first.
			next = &plugin.Observation{Phase: plugin.PhaseNotStarted}
		}
		t := r.transitionFor(ta, st, next, now)
		if t.phase != plugin.PhaseNotStarted {
			evs = append(evs, r.event(ta, st, t))
			names = append(names, historyName(t))
		}
		applyTransition(st, t, ta.Generation)

	default:
		requeue = minPositive(requeue, obs.RecheckAfter)
		t := r.transitionFor(ta, st, obs, now)
		switch {
		case t.final && t.phase == plugin.PhaseSucceeded:
			r.cacheAfterSuccess(ctx, ta, st, &t)
		case t.final:
			r.releaseReservation(ctx, ta)
		default:
			requeue = minPositive(requeue, r.heartbeat(ctx, ta, st))
		}
		if !changed(ta.Status, *st, t) {
			// Nothing new to report; only bookkeeping (adoption, counters) may be written.
			break
		}
		st.PluginPhaseVersion = nextVersion(ta.Status, st.Attempts)
		evs = append(evs, r.event(ta, st, t))
		names = append(names, historyName(t))
		applyTransition(st, t, ta.Generation)
		if t.final && obs.Finished && !obs.OccurredAt.IsZero() {
			metrics.ObserveTerminalLatency(now.Sub(obs.OccurredAt))
		}
		if t.final && st.PodName != "" && !obs.Finished {
			// A stuck workload (bad image, config error) or sidecars outliving a
			// successful primary container would hold the node: stop it. A finished
			// pod stays for its logs until the TaskAction goes.
			if err := p.Abort(ctx, r.Client, tc); err != nil {
				return ctrl.Result{}, fmt.Errorf("abort attempt %d: %w", st.Attempts, err)
			}
		}
	}
	if err := r.persist(ctx, ta, st, evs, names); err != nil {
		return ctrl.Result{}, err
	}
	for _, name := range after {
		if name != "" {
			if err := p.Abort(ctx, r.Client, r.taskContext(ta, st.Attempts-1)); err != nil {
				log.FromContext(ctx).Info("could not delete the pod of a failed attempt", "pod", name, "error", err.Error())
			}
		}
	}
	if IsTerminal(ta) {
		return ctrl.Result{}, r.ensureTerminalMetadata(ctx, ta)
	}
	return ctrl.Result{RequeueAfter: minPositive(requeue, r.timeoutIn(ta, st, now))}, nil
}

// observe reads the current attempt, launching it when it has not been
// launched. A nil observation means: nothing to do until a watch event.
func (r *Reconciler) observe(ctx context.Context, ta *flytev1.TaskAction, st *flytev1.TaskActionStatus, p plugin.Plugin, tc plugin.TaskContext, now time.Time) (*plugin.Observation, error) {
	name := p.ResourceName(tc)
	if d := r.timeout(ta); d > 0 && st.PodName == name && st.AttemptStartedAt != nil && !now.Before(st.AttemptStartedAt.Add(d)) {
		if err := p.Abort(ctx, r.Client, tc); err != nil {
			return nil, fmt.Errorf("abort timed-out attempt: %w", err)
		}
		return &plugin.Observation{Phase: plugin.PhaseRetryableFailure, Error: &plugin.ExecError{
			Code: CodeTimeout, Kind: flytev1.ErrorKindUser,
			Message: fmt.Sprintf("attempt %d exceeded its timeout of %v", tc.Attempt, d),
		}}, nil
	}

	obs, err := p.Observe(ctx, r.Client, tc)
	if err != nil {
		return nil, fmt.Errorf("observe %s: %w", name, err)
	}
	launched := st.PodName == name
	if obs.Phase == plugin.PhaseNotStarted && !launched {
		return r.launch(ctx, st, p, tc, now)
	}
	if obs.Phase == plugin.PhaseNotStarted || !launched {
		// The cache and the status disagree: either the cache has not caught up
		// with our create or delete, or the pod changed behind our back. The API
		// server decides.
		obs, err = p.Observe(ctx, r.APIReader, tc)
		if err != nil {
			return nil, fmt.Errorf("observe %s: %w", name, err)
		}
	}
	switch {
	case obs.Phase == plugin.PhaseNotStarted && launched:
		return &plugin.Observation{Phase: plugin.PhaseRetryableFailure, Error: &plugin.ExecError{
			Code: CodeResourceDeletedExternally, Kind: flytev1.ErrorKindSystem,
			Message: fmt.Sprintf("pod %s/%s was deleted by someone other than the executor", ta.Namespace, name),
		}}, nil
	case obs.Phase == plugin.PhaseNotStarted:
		return r.launch(ctx, st, p, tc, now)
	case !launched && obs.Deleting:
		// The pod of an earlier try of this attempt is going away; its deletion wakes us.
		return nil, nil
	case !launched:
		// We created it but did not record it (a crash between the two): adopt it.
		st.PodName = name
		if st.AttemptStartedAt == nil {
			t := metav1.NewTime(now)
			st.AttemptStartedAt = &t
		}
		if st.StartedAt == nil {
			st.StartedAt = st.AttemptStartedAt
		}
	}
	return &obs, nil
}

// launch starts the attempt and records it in st.
func (r *Reconciler) launch(ctx context.Context, st *flytev1.TaskActionStatus, p plugin.Plugin, tc plugin.TaskContext, now time.Time) (*plugin.Observation, error) {
	name := p.ResourceName(tc)
	if err := p.Launch(ctx, r.Client, tc); err != nil {
		var le *plugin.LaunchError
		if errors.As(err, &le) {
			phase := plugin.PhasePermanentFailure
			if le.Retryable {
				phase = plugin.PhaseRetryableFailure
			}
			e := le.Err
			return &plugin.Observation{Phase: phase, Error: &e}, nil
		}
		return nil, fmt.Errorf("launch %s: %w", name, err)
	}
	st.PodName = name
	st.SystemRetryAt = nil
	t := metav1.NewTime(now)
	st.AttemptStartedAt = &t
	metrics.Attempt()
	if st.StartedAt == nil {
		st.StartedAt = &t
		metrics.ObserveLaunchLatency(now.Sub(tc.TaskAction.CreationTimestamp.Time))
	}
	return &plugin.Observation{Phase: plugin.PhaseQueued, Message: "pod created", OccurredAt: now}, nil
}

// transitionFor turns an observation into the transition to record.
func (r *Reconciler) transitionFor(ta *flytev1.TaskAction, st *flytev1.TaskActionStatus, obs *plugin.Observation, now time.Time) transition {
	t := transition{phase: obs.Phase, message: obs.Message, err: obs.Error, at: at(obs, now)}
	switch obs.Phase {
	case plugin.PhaseSucceeded:
		t.final, t.reason = true, flytev1.ReasonCompleted
	case plugin.PhasePermanentFailure, plugin.PhaseRetryableFailure:
		t.final, t.reason = true, flytev1.ReasonPermanentFailure
		if obs.Error != nil && obs.Error.Code == CodeTimeout {
			t.reason = flytev1.ReasonTimedOut
		}
		if t.message == "" && obs.Error != nil {
			t.message = obs.Error.Message
		}
	}
	return t
}

// changed says whether t is a transition worth reporting: a new phase, or new
// details of the same phase.
func changed(old, st flytev1.TaskActionStatus, t transition) bool {
	if old.Attempts != st.Attempts || old.PluginPhase != string(t.phase) || old.PodName != st.PodName {
		return true
	}
	if c := progressing(old); c != nil && c.Message != t.message && t.message != "" {
		return true
	}
	return t.final
}

func progressing(st flytev1.TaskActionStatus) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == flytev1.ConditionProgressing {
			return &st.Conditions[i]
		}
	}
	return nil
}

// nextVersion numbers the events of one attempt 0, 1, 2, ...: with the
// attempt and phase it identifies an event, so that a re-send is stored once.
func nextVersion(old flytev1.TaskActionStatus, attempt int32) int32 {
	if old.Attempts != attempt || old.PluginPhase == "" {
		return 0
	}
	return old.PluginPhaseVersion + 1
}

// systemFailure counts a system-level failure of the current attempt and
// either relaunches it after a backoff or, past the ceiling, fails the TaskAction.
func (r *Reconciler) systemFailure(ctx context.Context, ta *flytev1.TaskAction, st *flytev1.TaskActionStatus, p plugin.Plugin, tc plugin.TaskContext, cause *plugin.ExecError, fromPod bool, now time.Time) (ctrl.Result, error) {
	st.SystemFailures++
	metrics.SystemFailure(cause.Code)
	r.warn(ta, EventFailedPluginHandle, "HandlingPlugin", fmt.Sprintf("plugin %q system failure %d of at most %d: [%s] %s", p.ID(), st.SystemFailures, r.Options.MaxSystemFailures, cause.Code, cause.Message))
	if st.SystemFailures > r.Options.MaxSystemFailures {
		err := &plugin.ExecError{Code: CodeMaxSystemFailuresExceeded, Kind: flytev1.ErrorKindSystem,
			Message: fmt.Sprintf("failed with a system error %d times in a row; last: [%s] %s", st.SystemFailures, cause.Code, cause.Message)}
		if err := p.Abort(ctx, r.Client, tc); err != nil {
			return ctrl.Result{}, fmt.Errorf("abort attempt %d: %w", st.Attempts, err)
		}
		r.releaseReservation(ctx, ta)
		t := transition{phase: plugin.PhasePermanentFailure, err: err, message: err.Message, at: now, final: true, reason: flytev1.ReasonPermanentFailure}
		st.PluginPhaseVersion = nextVersion(ta.Status, st.Attempts)
		ev := r.event(ta, st, t)
		applyTransition(st, t, ta.Generation)
		if err := r.persist(ctx, ta, st, []events.Event{ev}, []string{historyName(t)}); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.ensureTerminalMetadata(ctx, ta)
	}
	if fromPod {
		// The attempt's pod failed for reasons not its own: remove it, and relaunch
		// the same attempt once it is gone and the backoff has passed.
		if err := p.Abort(ctx, r.Client, tc); err != nil {
			return ctrl.Result{}, fmt.Errorf("remove pod after system failure: %w", err)
		}
		st.PodName = ""
		st.AttemptStartedAt = nil
	}
	wait := systemBackoff(r.Options.RequeueDuration, st.SystemFailures)
	retryAt := metav1.NewTime(now.Add(wait))
	st.SystemRetryAt = &retryAt
	st.ErrorState = &flytev1.ErrorState{Code: cause.Code, Kind: flytev1.ErrorKindSystem, Message: truncate(cause.Message, 4096)}
	if err := r.patchStatus(ctx, ta, st); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// failBeforeStart fails a TaskAction that cannot start (invalid spec, no plugin):
// no finalizer, no pod, no requeue.
func (r *Reconciler) failBeforeStart(ctx context.Context, ta *flytev1.TaskAction, reason, code, kubeReason, msg string) (ctrl.Result, error) {
	r.warn(ta, kubeReason, "ValidatingTaskAction", msg)
	st := ta.Status.DeepCopy()
	if st.Attempts < 1 {
		st.Attempts = 1
	}
	t := transition{phase: plugin.PhasePermanentFailure, message: msg, at: r.Clock.Now(), final: true, reason: reason,
		err: &plugin.ExecError{Code: code, Kind: flytev1.ErrorKindUser, Message: msg}}
	var evs []events.Event
	if ta.Spec.Project != "" && ta.Spec.Domain != "" && ta.Spec.RunName != "" && ta.Spec.ActionName != "" {
		evs = append(evs, r.event(ta, st, t)) // without its identity the service could not store it
	}
	applyTransition(st, t, ta.Generation)
	if err := r.persist(ctx, ta, st, evs, []string{historyName(t)}); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.ensureTerminalMetadata(ctx, ta)
}

// finalize runs when a TaskAction is deleted: stop its attempt, report the
// abort unless it had already ended, then let it go.
func (r *Reconciler) finalize(ctx context.Context, ta *flytev1.TaskAction) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(ta, Finalizer) {
		return ctrl.Result{}, nil
	}
	if !IsTerminal(ta) {
		if p, err := r.Registry.Resolve(ta.Spec.TaskType); err == nil {
			attempt := max(ta.Status.Attempts, 1)
			tc := r.taskContext(ta, attempt)
			if err := p.Abort(ctx, r.Client, tc); err != nil {
				return ctrl.Result{}, fmt.Errorf("abort on delete: %w", err)
			}
			if err := p.Finalize(ctx, r.Client, tc); err != nil {
				return ctrl.Result{}, fmt.Errorf("finalize on delete: %w", err)
			}
			r.releaseReservation(ctx, ta)
			st := ta.Status.DeepCopy()
			st.Attempts = attempt
			st.PluginPhaseVersion = nextVersion(ta.Status, attempt)
			t := transition{phase: plugin.PhasePermanentFailure, message: "the TaskAction was deleted", at: r.Clock.Now(), final: true, reason: flytev1.ReasonAborted}
			if err := r.report(ctx, ta, []events.Event{r.event(ta, st, t)}); err != nil {
				metrics.Transition(flytev1.ReasonAborted, metrics.OutcomeError)
				return ctrl.Result{}, err
			}
			metrics.Transition(flytev1.ReasonAborted, metrics.OutcomeOK)
		}
	}
	if err := r.patchMeta(ctx, ta, func(o *flytev1.TaskAction) { controllerutil.RemoveFinalizer(o, Finalizer) }); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	// The API server deletes the object now; until the cache says so, any copy
	// of it is stale (the last write's resourceVersion does not change).
	r.writes.wrote(client.ObjectKeyFromObject(ta), "deleted")
	return ctrl.Result{}, nil
}

// ensureTerminalMetadata labels a terminal TaskAction for the garbage collector
// and drops the finalizer in one write: nothing is left to abort or report.
func (r *Reconciler) ensureTerminalMetadata(ctx context.Context, ta *flytev1.TaskAction) error {
	completed := r.Clock.Now()
	if ta.Status.CompletedAt != nil {
		completed = ta.Status.CompletedAt.Time
	}
	want := completed.UTC().Format(CompletedTimeLabelFormat)
	if ta.Labels[TerminationStatusLabel] == TerminationStatusValue && ta.Labels[CompletedTimeLabel] != "" && !controllerutil.ContainsFinalizer(ta, Finalizer) {
		return nil
	}
	return r.patchMeta(ctx, ta, func(o *flytev1.TaskAction) {
		if o.Labels == nil {
			o.Labels = map[string]string{}
		}
		o.Labels[TerminationStatusLabel] = TerminationStatusValue
		if o.Labels[CompletedTimeLabel] == "" {
			o.Labels[CompletedTimeLabel] = want
		}
		controllerutil.RemoveFinalizer(o, Finalizer)
	})
}

// persist reports the events of the transitions, then writes the status that
// records them: a status never runs ahead of what the events service knows.
func (r *Reconciler) persist(ctx context.Context, ta *flytev1.TaskAction, st *flytev1.TaskActionStatus, evs []events.Event, names []string) error {
	err := r.report(ctx, ta, evs)
	if err == nil {
		err = r.patchStatus(ctx, ta, st)
	}
	outcome := metrics.OutcomeOK
	if err != nil {
		outcome = metrics.OutcomeError
	}
	for _, n := range names {
		metrics.Transition(n, outcome)
	}
	return err
}

// report delivers events before the status that records them is written.
func (r *Reconciler) report(ctx context.Context, ta *flytev1.TaskAction, evs []events.Event) error {
	for _, ev := range evs {
		if err := r.Recorder.Record(ctx, ev); err != nil {
			r.warn(ta, EventActionEventPublishError, "PublishingActionEvent", fmt.Sprintf("failed to report %s of attempt %d: %v", ev.Phase, ev.Attempt, err))
			return fmt.Errorf("report %s event: %w", ev.Phase, err)
		}
	}
	return nil
}

// event builds the event for transition t of the attempt in st.
func (r *Reconciler) event(ta *flytev1.TaskAction, st *flytev1.TaskActionStatus, t transition) events.Event {
	ev := events.Event{
		Project: ta.Spec.Project, Domain: ta.Spec.Domain, Run: ta.Spec.RunName, Action: ta.Spec.ActionName,
		Attempt: st.Attempts, Phase: eventPhase(t), Version: st.PluginPhaseVersion,
		UpdatedAt: t.at.UTC(), Cluster: r.Options.Cluster, PodName: st.PodName,
		CacheStatus: string(st.CacheStatus),
	}
	if ta.Spec.ParentActionName != nil {
		ev.ParentAction = *ta.Spec.ParentActionName
	}
	if ta.Spec.RunOutputBase != "" {
		prefix := task.OutputPrefix(ta, st.Attempts)
		ev.OutputURI, ev.ReportURI = prefix+"/outputs.pb", prefix+"/report.html"
	}
	if t.outputURI != "" {
		ev.OutputURI = t.outputURI
	}
	if t.err != nil {
		ev.Error = &events.ErrorInfo{Code: t.err.Code, Kind: string(t.err.Kind), Message: t.err.Message}
	}
	if t.message != "" {
		ev.ClusterEvents = []events.ClusterEvent{{OccurredAt: t.at.UTC(), Message: t.message}}
	}
	return ev
}

// patchStatus writes only the status fields that changed, by merge patch.
func (r *Reconciler) patchStatus(ctx context.Context, ta *flytev1.TaskAction, st *flytev1.TaskActionStatus) error {
	if equality.Semantic.DeepEqual(ta.Status, *st) {
		return nil
	}
	base := ta.DeepCopy()
	ta.Status = *st
	if err := r.Client.Status().Patch(ctx, ta, client.MergeFrom(base)); err != nil {
		ta.Status = base.Status
		return fmt.Errorf("patch status: %w", err)
	}
	r.writes.wrote(client.ObjectKeyFromObject(ta), ta.ResourceVersion)
	return nil
}

// patchMeta changes labels or finalizers with a JSON patch that tests the
// finalizer list it replaces: a concurrent change of that list fails the patch
// (and the reconcile retries), while unrelated writes (status, other labels)
// never conflict with it.
func (r *Reconciler) patchMeta(ctx context.Context, ta *flytev1.TaskAction, mutate func(*flytev1.TaskAction)) error {
	err := r.patchMetaOnce(ctx, ta, mutate)
	if !apierrors.IsInvalid(err) || r.APIReader == nil {
		return err
	}
	// The test of the finalizer list failed: our copy was older than the
	// object. Patch once more from what the API server has now.
	live := &flytev1.TaskAction{}
	if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ta), live); gerr != nil {
		return err
	}
	ta.ObjectMeta = live.ObjectMeta
	return r.patchMetaOnce(ctx, ta, mutate)
}

func (r *Reconciler) patchMetaOnce(ctx context.Context, ta *flytev1.TaskAction, mutate func(*flytev1.TaskAction)) error {
	base := ta.DeepCopy()
	mutate(ta)
	ops := metaPatch(base, ta)
	if len(ops) == 0 {
		return nil
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, ta, client.RawPatch(types.JSONPatchType, raw)); err != nil {
		ta.ObjectMeta = base.ObjectMeta
		return err
	}
	r.writes.wrote(client.ObjectKeyFromObject(ta), ta.ResourceVersion)
	return nil
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// metaPatch lists the JSON patch operations that turn old's labels and
// finalizers into new's.
func metaPatch(old, new *flytev1.TaskAction) []jsonPatchOp {
	var ops []jsonPatchOp
	if !equality.Semantic.DeepEqual(old.Finalizers, new.Finalizers) {
		fins := new.Finalizers
		if fins == nil {
			fins = []string{}
		}
		if old.Finalizers != nil {
			ops = append(ops, jsonPatchOp{Op: "test", Path: "/metadata/finalizers", Value: old.Finalizers})
		}
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/finalizers", Value: fins})
	}
	if !equality.Semantic.DeepEqual(old.Labels, new.Labels) {
		if old.Labels == nil {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/labels", Value: new.Labels})
		} else {
			keys := make([]string, 0, len(new.Labels))
			for k := range new.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if v, ok := old.Labels[k]; !ok || v != new.Labels[k] {
					ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/labels/" + jsonPointerEscape(k), Value: new.Labels[k]})
				}
			}
		}
	}
	return ops
}

func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func (r *Reconciler) warn(ta *flytev1.TaskAction, reason, action, note string) {
	if r.KubeEvents != nil {
		r.KubeEvents.Eventf(ta, nil, corev1.EventTypeWarning, reason, action, "%s", truncate(note, 1024))
	}
}

func (r *Reconciler) taskContext(ta *flytev1.TaskAction, attempt int32) plugin.TaskContext {
	return plugin.TaskContext{TaskAction: ta, Attempt: attempt, Settings: r.Options.Settings}
}

func (r *Reconciler) timeout(ta *flytev1.TaskAction) time.Duration {
	t, err := task.FromTaskAction(ta)
	if err != nil {
		return 0
	}
	return t.Timeout
}

// timeoutIn is how long until the running attempt times out (0: no timeout).
func (r *Reconciler) timeoutIn(ta *flytev1.TaskAction, st *flytev1.TaskActionStatus, now time.Time) time.Duration {
	d := r.timeout(ta)
	if d <= 0 || st.AttemptStartedAt == nil {
		return 0
	}
	left := st.AttemptStartedAt.Add(d).Sub(now)
	if left <= 0 {
		return time.Millisecond
	}
	return left
}

func at(obs *plugin.Observation, now time.Time) time.Time {
	if obs.OccurredAt.IsZero() {
		return now
	}
	return obs.OccurredAt
}

func ptrResult(r *ctrl.Result) ctrl.Result {
	if r == nil {
		return ctrl.Result{}
	}
	return *r
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	case a < b:
		return a
	}
	return b
}
