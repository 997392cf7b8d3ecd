// Package controller holds the TaskAction reconciler. Each reconcile gathers
// what it needs (the TaskAction, its decoded task, its pod, the cache's
// answer) into a World, decides from it and the time alone what to do (a
// Plan: events, the new status, actions, when to look again), and applies the
// plan in a crash-safe order: events are reported and acknowledged, then the
// status that records them is written, then anything is destroyed.
//
// Where things are: the flow here; gathering in gather*.go and duplicates.go;
// the decision in taskaction_decide.go, asking the pure policies
// (policy_*.go) for verdicts (verdict.go) that the plan's writers
// (taskaction_plan.go) carry into the plan; the status in
// taskaction_status.go, own_record.go, taskaction_events.go and
// taskaction_statushold.go; the launch in launch.go; apply in apply.go; what
// the process remembers, and why a crash loses nothing, in process_memory.go
// (docs/architecture.md tells the same from the outside).
package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kevents "k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/storage"
	"github.com/taskaction/executor/pkg/tasklog"
	"github.com/taskaction/executor/pkg/tracing"
)

// BlobStore is what the reconciler reads from blob storage (storage.Store).
type BlobStore interface {
	cache.InputsReader
	// ReadTaskError reads the runtime's error.pb under an attempt's output
	// prefix (code storage.CodeErrorFileNotFound when there is none).
	ReadTaskError(ctx context.Context, outputPrefix string) (storage.TaskError, error)
	// OutputsExist says whether an attempt wrote its outputs file.
	OutputsExist(ctx context.Context, outputPrefix string) (bool, error)
}

// Kubernetes Event reasons (all Warning).
const (
	EventFailedValidation        = "FailedValidation"
	EventFailedPluginResolve     = "FailedPluginResolve"
	EventFailedPluginHandle      = "FailedPluginHandle"
	EventActionEventPublishError = "ActionEventPublishFailed"
)

// DefaultSafetyWake is how long a TaskAction that waits for a watch event is
// left alone at most: a pod update lost across a watch break is made up for
// within a minute. It costs a reconcile from the cache, no request.
const DefaultSafetyWake = time.Minute

// Options tune the reconciler; they come from the executor's Config.
type Options struct {
	Cluster           string
	MaxSystemFailures int32
	RequeueDuration   time.Duration
	// SafetyWake bounds every wait for a watch event (DefaultSafetyWake when 0).
	SafetyWake time.Duration
	// QueuedStatusDelay holds back the Queued status of a new pod (0: none).
	QueuedStatusDelay time.Duration
	// SaturatedStatusDelay extends that hold while saturated (saturated()).
	SaturatedStatusDelay time.Duration
	// ExecutingStatusDelay bounds how long a running pod's Executing status
	// is held back while saturated (otherwise it is written at once).
	ExecutingStatusDelay time.Duration
	Settings             plugin.Settings
}

// Reconciler reconciles TaskActions.
type Reconciler struct {
	// Client reads from the informer cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server: a launch's name conflict, and a
	// pod this process created that the cache no longer shows.
	APIReader client.Reader
	// Pods creates the attempts' pods, answered with their metadata only;
	// nil: Client creates them.
	Pods     *PodCreator
	Registry *plugin.Registry
	Recorder events.Recorder
	// Cache is the task-output cache; nil disables it.
	Cache cache.Client
	// Storage reads the task's data in blob storage (Flyte-form tasks: the
	// inputs of the cache key, the runtime's error.pb); nil: none is read.
	Storage BlobStore
	// TaskLogs renders the log links of an attempt's events; nil: none.
	TaskLogs *tasklog.Renderer
	// KubeEvents emits Kubernetes Events; may be nil.
	KubeEvents kevents.EventRecorder
	Options    Options
	// Clock is the one clock of decisions and of the plugins' observations.
	Clock clock.PassiveClock
	// Tracer makes a span of each reconcile (off: the zero value).
	Tracer tracing.Tracer

	// memory is what this process keeps beyond the API server (processMemory).
	memory processMemory
	// queue is the controller's work queue (nil: none yet): how many
	// TaskActions wait in it for a worker, and where held statuses are woken
	// (liftHeldStatuses).
	queue atomic.Pointer[workQueue]
	// pressed replaces UnderPressure when set (unit tests).
	pressed func() bool
	// watches starts the watches of the plugins' kinds (SetupWithManager).
	watches *watches
	// objectsSynced, when set, replaces the newest resourceVersion the
	// informers handed out (watches.synced) for every kind (unit tests).
	objectsSynced func() string
}

// +kubebuilder:rbac:groups=flyte.org,resources=taskactions,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=flyte.org,resources=taskactions/status,verbs=patch
// +kubebuilder:rbac:groups=flyte.org,resources=taskactions/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

func (r *Reconciler) decider() decider {
	safety := r.Options.SafetyWake
	if safety <= 0 {
		safety = DefaultSafetyWake
	}
	return decider{
		Cluster:           r.Options.Cluster,
		MaxSystemFailures: uint32(max(r.Options.MaxSystemFailures, 0)),
		Backoff:           r.Options.RequeueDuration,
		Safety:            safety,
		QueuedDelay:       r.Options.QueuedStatusDelay,
		SaturatedDelay:    r.Options.SaturatedStatusDelay,
		ExecutingDelay:    r.Options.ExecutingStatusDelay,
	}
}

// Reconcile gathers, decides and applies for one TaskAction.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	ctx, span := r.Tracer.StartReconcile(ctx, req.Namespace, req.Name)
	defer func() { span.End(res.RequeueAfter, err) }()
	ta := &flytev1.TaskAction{}
	if err := r.Client.Get(ctx, req.NamespacedName, ta); err != nil {
		if apierrors.IsNotFound(err) {
			r.memory.forgetTaskAction(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if r.memory.released.has(req.NamespacedName, ta.UID) {
		return ctrl.Result{}, nil // let go; its deletion is on its way to the cache
	}
	if behind, arrived := r.memory.taskActionWrites.behind(req.NamespacedName, ta.ResourceVersion); behind {
		// Older than our own last write: its watch event brings the newer
		// copy, unless it reached the cache since the read.
		if !arrived {
			return ctrl.Result{RequeueAfter: wakeCacheLag}, nil
		}
		if err := r.Client.Get(ctx, req.NamespacedName, ta); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if behind, _ := r.memory.taskActionWrites.behind(req.NamespacedName, ta.ResourceVersion); behind {
			return ctrl.Result{RequeueAfter: wakeCacheLag}, nil
		}
	}
	stored := ta.Status.DeepCopy()
	ownView(&ta.Status)
	now := r.Clock.Now()
	w, p, err := r.gather(ctx, ta, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	w.Stored = stored
	d := r.decider()
	plan := d.decide(w, now)
	// Creations the decision depends on happen first, and the decision is
	// taken again with their outcome (at most a launch and a cache put).
	for i := 0; i < 2 && (plan.Launch || plan.Populate != nil); i++ {
		if plan.Launch {
			if plan.AddFinalizer {
				if err := r.addFinalizer(ctx, ta); err != nil {
					return ctrl.Result{}, err
				}
			}
			if err := r.launch(ctx, &w, p, now); err != nil {
				return ctrl.Result{}, err
			}
		} else {
			if k := w.InputsKey; k != nil && (k.StorageErr != nil || k.Err != nil) {
				w.Put = &putOutcome{Err: errors.Join(k.StorageErr, k.Err)}
			} else {
				key, _ := cacheKey(w)
				_, perr := r.Cache.Put(ctx, key, *plan.Populate)
				w.Put = &putOutcome{Err: perr}
			}
		}
		plan = d.decide(w, now)
	}
	if plan.Launch || plan.Populate != nil {
		return ctrl.Result{}, fmt.Errorf("internal error: the decision for %s did not settle", req.NamespacedName)
	}
	if span != nil {
		span.Decided(plan.Status.Attempts, plan.Status.PluginPhase, eventPhases(plan.Events))
	}
	res, err = r.apply(ctx, w, p, plan)
	if err != nil {
		return res, err
	}
	r.memory.heldStatuses.note(req.NamespacedName, ta.UID, plan.HeldWhileSaturated)
	if r.memory.taskActionWrites.takeMissed(req.NamespacedName) {
		// An event taken for our write was another's: look again.
		res.RequeueAfter = wakeNow
	}
	return res, nil
}

// workQueue is what the reconciler uses of its controller's work queue.
type workQueue interface {
	Len() int
	AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request)
}

// eventPhases names the events of a plan, for its reconcile's span.
func eventPhases(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = string(ev.Phase)
	}
	return out
}

// pressureMemory is how long saturation counts after it was last seen. Under
// a burst its signals pause for seconds at a time (the queue empties, a few
// quick writes pull the average down); were the held statuses all written at
// such a pause, that flood of writes would bring the pressure back.
const pressureMemory = 30 * time.Second

// saturated says whether this process or the API server is short of
// capacity: TaskActions wait in the work queue for a worker, requests wait
// for the API client's rate limiter (the queue may be empty then, its
// TaskActions taken by workers that wait), or the API server answers writes
// slowly. Then every write saved lets another through sooner.
func (r *Reconciler) saturated() bool {
	if q := r.queue.Load(); q != nil && (*q).Len() > 0 {
		metrics.NotePressure()
		return true
	}
	if r.pressed != nil {
		return r.pressed()
	}
	return UnderPressure()
}

// UnderPressure says whether the executor was saturated (saturated: its own
// queue, as reconciles last saw it, or the API server) within
// pressureMemory. The events batcher reads it to hold its batches longer.
func UnderPressure() bool { return metrics.APIPressureWithin(pressureMemory) }

// objectChanges passes the events of an attempt's object that can change its
// phase: a pod's status or deletion, but not its scheduling alone
// (podChangeMatters; any change of another kind: they are few and change
// seldom); and creations, except the event of a create of ours
// that no reconcile waits for (the launching reconcile had the object from
// its create's answer; a reconcile that found the cache behind the launch
// waits for it, and wakeCacheLag is only the safety net).
func objectChanges(created *readYourWrites) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			return !created.echo(client.ObjectKeyFromObject(e.Object), "", e.Object.GetResourceVersion())
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Pod)
			n, ok2 := e.ObjectNew.(*corev1.Pod)
			if !ok1 || !ok2 {
				return e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
			}
			return podChangeMatters(o, n)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// synced is the newest resourceVersion the informer of p's object kind has
// handed out: its store holds everything up to it (nil: unknown).
func (r *Reconciler) synced(p plugin.Plugin) func() string {
	if r.objectsSynced != nil {
		return r.objectsSynced
	}
	return r.watches.synced(p)
}

// SetupWithManager registers the reconciler: it watches TaskActions (every
// event, periodic resyncs included: they are the safety net) and the objects
// its plugins create for them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.memory = newProcessMemory()
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &flytev1.TaskAction{}, identityIndex, actionIdentity); err != nil {
		return fmt.Errorf("index TaskActions by identity: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("taskaction").
		// The event of our own status or metadata write wakes nothing: the
		// reconcile that wrote it planned what follows (readYourWrites.echo).
		For(&flytev1.TaskAction{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return !r.memory.taskActionWrites.echo(client.ObjectKeyFromObject(e.ObjectNew), e.ObjectOld.GetResourceVersion(), e.ObjectNew.GetResourceVersion())
			},
		})).
		// A new TaskAction with another's identity also wakes that other one:
		// whichever came first keeps running, the other is refused.
		Watches(&flytev1.TaskAction{}, handler.EnqueueRequestsFromMapFunc(r.sameIdentity),
			builder.WithPredicates(predicate.Funcs{
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				DeleteFunc:  func(event.DeleteEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: workers,
			// Set here: WithOptions replaces what WithLogConstructor would set.
			LogConstructor: reconcileLogger(mgr.GetLogger()),
			// Completions first (priority.go): a finished pod's TaskAction is
			// reconciled ahead of queued launches. The queue's length says
			// whether the executor is saturated (World.Saturated).
			UsePriorityQueue: ptr.To(true),
			NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
				q := priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
					o.Log = mgr.GetLogger().WithValues("controller", name)
					o.RateLimiter = rl
				})
				var wq workQueue = q
				r.queue.Store(&wq)
				return q
			},
			// Per-object backoff only, capped at 30s: after an outage of the events
			// service every TaskAction retries within half a minute, instead of
			// queueing behind a cluster-wide 10/s bucket and a 16-minute ceiling.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](50*time.Millisecond, 30*time.Second),
		})
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(r.liftHeldStatusesLoop)); err != nil {
		return err
	}
	r.watches = &watches{started: map[schema.GroupVersionKind]*handledVersion{}, ctrl: c, cache: mgr.GetCache(),
		indexer: mgr.GetFieldIndexer(), mapper: mgr.GetRESTMapper(), scheme: mgr.GetScheme(),
		// Completions first (priority.go).
		handler: completionsFirst(handler.EnqueueRequestsFromMapFunc(controllingTaskAction)),
		preds: func(client.Object) []predicate.Predicate {
			return []predicate.Predicate{objectChanges(r.memory.objectCreates)}
		},
	}
	// The default plugin's kinds (pods) are watched from the start; the
	// others once a task needs them (watches).
	if def, err := r.Registry.Resolve(""); err == nil {
		if err := r.watches.ensure(ctx, def); err != nil {
			return fmt.Errorf("watch the default plugin's objects: %w", err)
		}
	}
	return nil
}

// sameIdentity lists the other TaskActions with obj's event identity.
func (r *Reconciler) sameIdentity(ctx context.Context, obj client.Object) []reconcile.Request {
	ids := actionIdentity(obj)
	if len(ids) == 0 {
		return nil
	}
	l := &flytev1.TaskActionList{}
	if err := r.Client.List(ctx, l, client.MatchingFields{identityIndex: ids[0]}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range l.Items {
		if l.Items[i].UID != obj.GetUID() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&l.Items[i])})
		}
	}
	return out
}

// addFinalizer puts the finalizer on before anything is launched.
func (r *Reconciler) addFinalizer(ctx context.Context, ta *flytev1.TaskAction) error {
	if controllerutil.ContainsFinalizer(ta, flytev1.Finalizer) {
		return nil
	}
	if err := r.patchMeta(ctx, ta, func(o *flytev1.TaskAction) { controllerutil.AddFinalizer(o, flytev1.Finalizer) }); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
}
