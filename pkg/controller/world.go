package controller

import (
	"time"

	"github.com/taskaction/executor/gen/flyteidl2/core"

	"k8s.io/apimachinery/pkg/types"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// holder says who controls the object found under an attempt's name.
type holder int

const (
	holderNone               holder = iota // nothing holds the name
	holderUs                               // this TaskAction (controller reference, same UID)
	holderPreviousTaskAction               // an earlier TaskAction of the same name (the GC removes it)
	holderForeign                          // anything else: never touched
)

// resource is an attempt's object (a pod) as gathered.
type resource struct {
	Name     string
	Holder   holder
	UID      types.UID
	Created  time.Time
	Deleting bool
	// Obs is the plugin's reading of it (only when Holder is holderUs).
	Obs plugin.Observation
	// Logs are where its logs are (a pod of ours; nil otherwise), rendered on
	// first use from the gathered pod.
	Logs func() attemptLogs
}

// cacheAnswer is what the task-output cache said before a launch.
type cacheAnswer struct {
	Key cache.Key
	// Asked: the cache was consulted in this reconcile.
	Asked     bool
	Hit       *cache.Entry
	LookupErr error
	KeyErr    error
	// HeldBy names another owner of the reservation ("" when we may run).
	HeldBy string
}

// inputsKey is a cache key that needed the task's inputs.
type inputsKey struct {
	Key cache.Key
	// Inputs are the inputs read for the key; a launch that renders
	// {{.Inputs.x}} uses them instead of reading them again.
	Inputs *core.LiteralMap
	// StorageErr: the inputs could not be read (a system failure).
	StorageErr error
	// Err: the key could not be computed from what was read (the task runs
	// without the cache).
	Err error
}

// duplicateAction is a TaskAction with the same action identity as another.
type duplicateAction struct {
	Name string
	// SameSecond: both were created in the same second (one epoch).
	SameSecond bool
}

// World is everything one reconcile decides from, gathered before deciding.
type World struct {
	// TA is the TaskAction, its status as the executor recorded it (ownView).
	TA *flytev1.TaskAction
	// Stored is its status as stored, other writers' values included (nil:
	// TA's): status patches are computed from it.
	Stored *flytev1.TaskActionStatus
	// Task is the decoded task (nil with SpecErr).
	Task    *task.Task
	SpecErr error
	// PluginErr says no plugin serves the task type.
	PluginErr error
	// Duplicate is another TaskAction whose events this one's could not be
	// told apart from (nil: none).
	Duplicate *duplicateAction

	// Pod is the current attempt's object under its name.
	Pod resource
	// PodCacheBehind: the cache has not yet seen the pod this process created.
	PodCacheBehind bool
	// LaunchInFlight is this process's launch of the current attempt while the
	// status does not record it yet (nil: none, or forgotten in a restart).
	LaunchInFlight *launchRecord
	// Saturated: the executor or the API server is short of capacity
	// (Reconciler.saturated), so a new pod's statuses are held back longer.
	Saturated bool
	// Others are the objects of other attempts this TaskAction controls.
	Others []resource

	Cache cacheAnswer
	// RuntimeError is the finished attempt's error.pb, as read (nil: not read).
	RuntimeError *runtimeError
	// InputsKey is the cache key gather computed from the template and the
	// inputs in blob storage (Flyte-form tasks; nil: not computed).
	InputsKey *inputsKey

	// Launch is the outcome of a launch made in this reconcile (nil: none).
	Launch *launchOutcome
	// Put is the outcome of storing the outputs in the cache (nil: not tried).
	Put *putOutcome

	// ConditionTimeout bounds how long a condition action waits (0: forever).
	ConditionTimeout time.Duration
}

type launchOutcome struct {
	// Err is nil when the pod was created.
	Err error
}

type putOutcome struct {
	Err error
}

// objectRef is an object to delete: exactly this one (UID precondition).
type objectRef struct {
	Name string
	UID  types.UID
}

// warning is a Kubernetes Event (Warning) to emit.
type warning struct {
	Reason, Action, Note string
}

// Plan is what a reconcile decided: the events to report, the status that
// records them, and the actions around them. apply carries it out in a
// crash-safe order.
type Plan struct {
	Status flytev1.TaskActionStatus
	Events []events.Event
	// Recorded are the history names of the reported transitions (metrics).
	Recorded []string

	// AddFinalizer comes before anything is launched.
	AddFinalizer bool
	// Launch asks to create the attempt's pod, then decide again.
	Launch bool
	// Populate asks to store the outputs in the cache, then decide again.
	Populate *cache.Entry
	// ExtendReservation keeps a held cache reservation alive.
	ExtendReservation bool

	// Destructive actions, after the status is persisted.
	Delete             []objectRef
	ReleaseReservation bool
	// RemoveFinalizer lets a deleted TaskAction go, last.
	RemoveFinalizer bool

	Warnings []warning
	Metrics  planMetrics
	// HeldWhileSaturated: the status is held back longer because the
	// executor is saturated; it is also woken when that ends (liftHeldStatuses).
	HeldWhileSaturated bool
	// WakeAfter is when to look again without a watch event (0: terminal).
	WakeAfter time.Duration
}

type planMetrics struct {
	Retry, Attempt, QuotaRefusal bool
	SystemFailure                string
	CacheLookup                  string
	LaunchLatency                time.Duration
	TerminalLatency              time.Duration
}

func (p *Plan) wake(d time.Duration) {
	if d > 0 && (p.WakeAfter <= 0 || d < p.WakeAfter) {
		p.WakeAfter = d
	}
}
