// Package plugin defines the small interface through which the reconciler runs
// a task type, and the registry that picks a plugin by taskType.
package plugin

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/podsecurity"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

// Phase is a plugin's reading of where an attempt is.
type Phase string

const (
	// PhaseNotStarted: nothing was launched for this attempt yet (or it is gone before it was seen).
	PhaseNotStarted          Phase = "NotStarted"
	PhaseQueued              Phase = "Queued"
	PhaseWaitingForResources Phase = "WaitingForResources"
	PhaseInitializing        Phase = "Initializing"
	PhaseRunning             Phase = "Running"
	PhaseSucceeded           Phase = "Succeeded"
	// PhaseRetryableFailure: the attempt failed; another attempt may succeed.
	PhaseRetryableFailure Phase = "RetryableFailure"
	// PhasePermanentFailure: the attempt failed and retrying cannot help.
	PhasePermanentFailure Phase = "PermanentFailure"
)

// IsTerminal says whether an attempt in phase p is over.
func (p Phase) IsTerminal() bool {
	return p == PhaseSucceeded || p == PhaseRetryableFailure || p == PhasePermanentFailure
}

// Error codes shared by the plugins and the reconciler (one definition each).
const (
	// CodeResourceDeletedExternally: the attempt's resource was deleted by
	// someone other than the executor (a system failure).
	CodeResourceDeletedExternally = "ResourceDeletedExternally"
	// CodeUnknownError: the attempt failed and nothing says why (a system failure).
	CodeUnknownError = "UnknownError"
)

// Truncate cuts s to at most n bytes, ending in "...", without splitting a
// UTF-8 sequence: the one rule for every message the executor stores.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}

// PodCondition is pod's condition of type t, nil if it has none.
func PodCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// ExecError describes why an attempt failed.
type ExecError struct {
	Code    string
	Kind    flytev1.ErrorKind
	Message string
}

// Observation is what a plugin reads from the world about one attempt.
type Observation struct {
	Phase Phase
	// Message explains the phase (a scheduling reason, an image pull, ...).
	Message string
	// Error is set for the failure phases.
	Error *ExecError
	// OccurredAt is when the phase was reached, as far as the plugin knows (zero: now).
	OccurredAt time.Time
	// Finished says the workload stopped by itself (a pod Succeeded or Failed,
	// or its primary container terminated while sidecars run on): the
	// attempt's outcome is final and its runtime's error.pb and outputs are
	// read. Its resource is kept for its logs unless Lingering. Unset for a
	// stuck workload, which the reconciler aborts when it fails the attempt.
	Finished bool
	// Lingering says a Finished attempt's resource still runs (sidecars
	// beside a primary container that terminated): the reconciler stops it
	// once the attempt's end is decided instead of keeping it.
	Lingering bool
	// Deleting says the attempt's resource exists but is being deleted.
	Deleting bool
	// RecheckAfter asks for another look after this long even without a watch
	// event (a grace period that is running out).
	RecheckAfter time.Duration
	// Logs are where the attempt's logs are, for a plugin whose object is not
	// a pod (an engine's dashboard, its replicas' pods); a pod's links are
	// rendered by the reconciler from the plugins.logs configuration.
	Logs []*core.TaskLog
	// LogContext names the pods and containers that hold the attempt's logs,
	// for a plugin whose object is not a pod (a pod's is built by the
	// reconciler).
	LogContext *core.LogContext
}

// Settings are the executor-wide values plugins need.
type Settings struct {
	DefaultServiceAccount      string
	DefaultCPU                 string
	DefaultMemory              string
	ImagePullGracePeriod       time.Duration
	CreateContainerGracePeriod time.Duration

	// Pod defaults, as Flyte's plugins.k8s section offers them.

	// DefaultEnvVars are added to every container of every task pod (after
	// the task's own, so they win), e.g. Flyte's chart sets _U_EP_OVERRIDE,
	// _U_INSECURE and _U_USE_ACTIONS here.
	DefaultEnvVars map[string]string
	// DefaultLabels and DefaultAnnotations go on every task pod, under the
	// task's own (Flyte's default annotation is
	// cluster-autoscaler.kubernetes.io/safe-to-evict: "false").
	DefaultLabels      map[string]string
	DefaultAnnotations map[string]string
	// DefaultNodeSelector and DefaultTolerations apply to every task pod.
	DefaultNodeSelector map[string]string
	DefaultTolerations  []corev1.Toleration
	// InterruptibleTolerations and InterruptibleNodeSelector apply to pods of
	// interruptible tasks; the node selector requirements join the required
	// node affinity of interruptible and non-interruptible pods respectively.
	InterruptibleTolerations                []corev1.Toleration
	InterruptibleNodeSelector               map[string]string
	InterruptibleNodeSelectorRequirement    *corev1.NodeSelectorRequirement
	NonInterruptibleNodeSelectorRequirement *corev1.NodeSelectorRequirement
	// GPUResourceName is the resource a generic GPU request becomes when the
	// task names no accelerator class; empty means nvidia.com/gpu.
	GPUResourceName corev1.ResourceName

	// PodSecurity, when set, is the policy every task pod must meet: the
	// executor may create pods its TaskActions' authors could not.
	PodSecurity *podsecurity.Policy

	// TaskLogs renders the log links of plugins.logs for a pod (nil: none):
	// an engine plugin renders its replicas' pods' links with it.
	TaskLogs *tasklog.Renderer
}

// TaskContext is one attempt of one TaskAction.
type TaskContext struct {
	TaskAction *flytev1.TaskAction
	// Task is the decoded task template; plugins read the task from it, never
	// from the TaskAction's template fields.
	Task *task.Task
	// Attempt is 1-based.
	Attempt  int32
	Settings Settings
	// Now is the reconcile's time: the one clock of decisions and observations
	// (grace periods). Zero means the plugin reads its own clock.
	Now time.Time
	// Inputs are the task's inputs when its command renders one
	// ({{.Inputs.x}}, Task.ReferencesInputs); nil leaves those placeholders as
	// they are.
	Inputs *core.LiteralMap
}

// Plugin runs one family of task types.
type Plugin interface {
	// ID names the plugin in logs and errors.
	ID() string
	// TaskTypes lists the task types the plugin serves.
	TaskTypes() []string
	// ResourceName names the attempt's primary object (for pods: the pod
	// name), of the first of WatchedTypes, created with this TaskAction as its
	// controller. Stable for the same TaskAction and attempt: the reconciler
	// finds the attempt's object by it and deletes it itself, exactly that
	// object (UID precondition), when the attempt is over.
	ResourceName(tc TaskContext) string
	// Launch starts the attempt. It must be idempotent: launching what already
	// exists is success. A *LaunchError says the attempt failed to launch.
	Launch(ctx context.Context, c client.Client, tc TaskContext) error
	// Observe reads the attempt's state from r (normally the informer cache):
	// the attempt's object, and pods (an engine's, which its operator labels
	// as the executor's). What r hands out may share its fields with the
	// cache: it is read, never modified.
	Observe(ctx context.Context, r client.Reader, tc TaskContext) (Observation, error)
	// Finalize releases what the plugin holds once the TaskAction is done.
	Finalize(ctx context.Context, c client.Client, tc TaskContext) error
	// WatchedTypes are the object types the plugin creates, owned by the
	// TaskAction through a controller reference, so that their changes trigger reconciles.
	// The objects stand for their types only and are never filled, so a plugin
	// may return the same ones on every call.
	WatchedTypes() []client.Object
}

// Requirer is a plugin whose object kinds the cluster must serve (an engine's
// custom resources: KubeRay's RayJob, ...). Its kinds are watched once a task
// needs them and the API server serves them, so that the executor starts and
// runs every other task without them, and an engine installed later needs no
// restart. A task whose kinds are not served fails at once, naming Requires.
type Requirer interface {
	// Requires says what must be installed, e.g. "KubeRay's CRDs
	// (rayjobs.ray.io), github.com/ray-project/kuberay".
	Requires() string
}

// SchemeBuilder is a plugin whose object types are not Kubernetes' own: it
// registers them (the engine's API types) with the executor's scheme.
type SchemeBuilder interface {
	AddToScheme(s *runtime.Scheme) error
}

// Validator is a plugin that can tell, without I/O, whether the attempt's
// object can be built from the task: the admission webhook refuses at
// `kubectl apply` what the launch would refuse (the same function decides
// both, so the two never disagree).
type Validator interface {
	Validate(tc TaskContext) error
}

// InputsUser is a plugin that reads the task's inputs at launch
// (TaskContext.Inputs) beyond what its command renders: the sleep plugin's
// duration.
type InputsUser interface {
	UsesInputs(t *task.Task) bool
}

// LaunchError is a launch failure that ends the attempt (as opposed to a
// transient error, which is a system failure to be retried).
type LaunchError struct {
	Err       ExecError
	Retryable bool
}

func (e *LaunchError) Error() string { return e.Err.Code + ": " + e.Err.Message }

// LogInput is an attempt as the log link templates see it, for its object
// generatedName in namespace: the run and action, the retry, the task's
// identity and config, and (Flyte's form) the template's own links. The
// caller adds the pod, the container and the times.
func LogInput(tc TaskContext, namespace, generatedName string) tasklog.Input {
	ta := tc.TaskAction
	in := tasklog.Input{
		Namespace: namespace, Project: ta.Spec.Project, Domain: ta.Spec.Domain,
		Run: ta.Spec.RunName, Action: ta.Spec.ActionName, RetryAttempt: uint32(max(tc.Attempt, 1) - 1),
		NodeID: ta.Spec.ActionName, GeneratedName: generatedName,
	}
	if t := tc.Task; t != nil {
		in.Task = &core.Identifier{ResourceType: core.ResourceType_TASK, Org: t.ID.Org, Project: t.ID.Project,
			Domain: t.ID.Domain, Name: t.ID.Name, Version: t.ID.Version}
		in.TaskConfig, in.Org = t.Config, t.ID.Org
		if t.Form == task.FormFlyte {
			tmpl := &core.TaskTemplate{}
			if err := proto.Unmarshal(t.Raw, tmpl); err == nil {
				in.TaskLinks = tmpl.GetMetadata().GetLogLinks()
			}
		}
	}
	return in
}
