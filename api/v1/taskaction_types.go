package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ActionType says what kind of action a TaskAction runs.
// +kubebuilder:validation:Enum=task;condition
type ActionType string

const (
	ActionTypeTask      ActionType = "task"
	ActionTypeCondition ActionType = "condition"
)

// TaskActionSpec is one attempt-spanning execution of one task of a workflow run.
type TaskActionSpec struct {
	// RunName is the name of the workflow run this action belongs to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=30
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="runName is immutable"
	// +required
	RunName string `json:"runName"`

	// Project of the run.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Project string `json:"project"`

	// Domain of the run.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Domain string `json:"domain"`

	// ActionName is the name of this action within its run.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=30
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="actionName is immutable"
	// +required
	ActionName string `json:"actionName"`

	// ParentActionName is the action that started this one, if any.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=30
	// +optional
	ParentActionName *string `json:"parentActionName,omitempty"`

	// ShortName is a display name.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	ShortName string `json:"shortName,omitempty"`

	// Group groups actions for display.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Group string `json:"group,omitempty"`

	// ActionType is task (the default) or condition.
	// +optional
	ActionType ActionType `json:"actionType,omitempty"`

	// TaskType selects the plugin that runs the task (e.g. container, python-task).
	// +kubebuilder:validation:MaxLength=63
	// +optional
	TaskType string `json:"taskType,omitempty"`

	// InputURI is the location of the task's inputs file.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	InputURI string `json:"inputUri,omitempty"`

	// RunOutputBase is the prefix under which every action of the run writes its outputs.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	RunOutputBase string `json:"runOutputBase,omitempty"`

	// CacheKey, when set, makes the executor consult the task-output cache.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	CacheKey string `json:"cacheKey,omitempty"`

	// EnvVars are run-scoped environment variables for the task's containers.
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[A-Za-z_][A-Za-z0-9_]*$'))",message="envVars keys must be valid environment variable names"
	// +optional
	EnvVars map[string]string `json:"envVars,omitempty"`

	// Interruptible overrides whether the task may run on interruptible capacity.
	// +optional
	Interruptible *bool `json:"interruptible,omitempty"`

	// TaskTemplate describes what to run.
	// +optional
	TaskTemplate *TaskTemplate `json:"taskTemplate,omitempty"`
}

// TaskTemplate is the typed description of a task.
type TaskTemplate struct {
	// ID names the task and its version.
	// +optional
	ID TaskID `json:"id,omitempty"`

	// Retries is the number of user retries; the task runs at most retries+1 times.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Retries int32 `json:"retries,omitempty"`

	// Timeout bounds one attempt, counted from the attempt's start (Go duration syntax, e.g. 90s).
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// CacheSerializable makes concurrent actions with the same cache key run only once.
	// +optional
	CacheSerializable bool `json:"cacheSerializable,omitempty"`

	// Container is the primary container of the task.
	// +optional
	Container *Container `json:"container,omitempty"`

	// SecurityContext says who the task runs as and which secrets it needs.
	// +optional
	SecurityContext *SecurityContext `json:"securityContext,omitempty"`

	// PodTemplate holds overrides merged onto the generated pod.
	// +optional
	PodTemplate *PodTemplate `json:"podTemplate,omitempty"`

	// Config holds plugin-specific settings.
	// +optional
	Config map[string]string `json:"config,omitempty"`
}

// TaskID identifies a task definition.
type TaskID struct {
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Name string `json:"name,omitempty"`
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Version string `json:"version,omitempty"`
}

// Container is the primary container of a task.
type Container struct {
	// +kubebuilder:validation:MinLength=1
	// +required
	Image string `json:"image"`
	// +optional
	Command []string `json:"command,omitempty"`
	// +optional
	Args []string `json:"args,omitempty"`
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// SecurityContext says who a task runs as and which secrets it needs.
type SecurityContext struct {
	// +optional
	RunAs *RunAs `json:"runAs,omitempty"`
	// +optional
	Secrets []Secret `json:"secrets,omitempty"`
}

// RunAs names the identity of the task's pod.
type RunAs struct {
	// K8sServiceAccount is the service account of the task's pod.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	K8sServiceAccount string `json:"k8sServiceAccount,omitempty"`
}

// MountRequirement says how a secret reaches the task.
// +kubebuilder:validation:Enum=ENV_VAR;FILE
type MountRequirement string

const (
	MountEnvVar MountRequirement = "ENV_VAR"
	MountFile   MountRequirement = "FILE"
)

// Secret is one secret a task needs.
type Secret struct {
	// +optional
	Group string `json:"group,omitempty"`
	// +kubebuilder:validation:MinLength=1
	// +required
	Key string `json:"key"`
	// +optional
	MountRequirement MountRequirement `json:"mountRequirement,omitempty"`
}

// PodTemplate holds overrides merged onto the pod the container plugin builds.
type PodTemplate struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// PrimaryContainerName names the container in Spec whose settings merge onto the task's container.
	// +optional
	PrimaryContainerName string `json:"primaryContainerName,omitempty"`
	// Spec is merged onto the generated pod spec. It is validated by the API server when the pod is created.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Spec *corev1.PodSpec `json:"spec,omitempty"`
}

// Condition types of a TaskAction.
const (
	ConditionProgressing = "Progressing"
	ConditionSucceeded   = "Succeeded"
	ConditionFailed      = "Failed"
)

// Condition reasons of a TaskAction.
const (
	ReasonQueued           = "Queued"
	ReasonInitializing     = "Initializing"
	ReasonExecuting        = "Executing"
	ReasonCompleted        = "Completed"
	ReasonRetryableFailure = "RetryableFailure"
	ReasonPermanentFailure = "PermanentFailure"
	ReasonAborted          = "Aborted"
	ReasonPluginNotFound   = "PluginNotFound"
	ReasonInvalidSpec      = "InvalidSpec"
	ReasonTimedOut         = "TimedOut"
	// ReasonPaused: a condition action waits for its signal.
	ReasonPaused = "Paused"
	// ReasonSignaled: a condition action received its signal.
	ReasonSignaled = "Signaled"
)

// CacheStatus is the outcome of consulting the task-output cache: Flyte's
// core.CatalogCacheStatus, stored as its integer value.
type CacheStatus int32

const (
	CacheDisabled      CacheStatus = 0
	CacheMiss          CacheStatus = 1
	CacheHit           CacheStatus = 2
	CachePopulated     CacheStatus = 3
	CacheLookupFailure CacheStatus = 4
	CachePutFailure    CacheStatus = 5
	CacheSkipped       CacheStatus = 6
	CacheEvicted       CacheStatus = 7
)

var cacheStatusNames = [...]string{"DISABLED", "MISS", "HIT", "POPULATED", "LOOKUP_FAILURE", "PUT_FAILURE", "SKIPPED", "EVICTED"}

// String is the status's name without Flyte's CACHE_ prefix (e.g. HIT).
func (c CacheStatus) String() string {
	if c >= 0 && int(c) < len(cacheStatusNames) {
		return cacheStatusNames[c]
	}
	return "UNKNOWN"
}

// ErrorKind says whose fault a failure is (USER or SYSTEM).
type ErrorKind string

const (
	ErrorKindUser   ErrorKind = "USER"
	ErrorKindSystem ErrorKind = "SYSTEM"
)

// ErrorState is the structured error of the last failure.
type ErrorState struct {
	// +optional
	Code string `json:"code,omitempty"`
	// +optional
	Kind ErrorKind `json:"kind,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// PhaseTransition is one entry of the phase timeline.
type PhaseTransition struct {
	Phase      string      `json:"phase"`
	OccurredAt metav1.Time `json:"occurredAt"`
	// +optional
	Message string `json:"message,omitempty"`
}

// TaskActionStatus has exactly the fields (names and types) of Flyte's
// TaskAction status, so that Flyte's actions service, which writes status with
// a full update from its own type, drops nothing the executor needs. What the
// executor keeps beyond them lives in PluginState or is derived again (pod of
// the attempt, attempt start, completion time).
type TaskActionStatus struct {
	// StateJSON is the action's state as Flyte's UI reads it.
	// +optional
	StateJSON string `json:"stateJson,omitempty"`

	// PluginState is opaque state the executor keeps between reconciles.
	// +optional
	PluginState []byte `json:"pluginState,omitempty"`

	// PluginStateVersion is the format version of PluginState.
	// +optional
	PluginStateVersion uint8 `json:"pluginStateVersion,omitempty"`

	// PluginPhase is the plugin's view of the phase last reported.
	// +optional
	PluginPhase string `json:"pluginPhase,omitempty"`

	// PluginPhaseVersion is the version of the last event reported for the current attempt.
	// +optional
	PluginPhaseVersion uint32 `json:"pluginPhaseVersion,omitempty"`

	// Attempts is the current attempt, 1-based.
	// +optional
	Attempts uint32 `json:"attempts,omitempty"`

	// SystemFailures counts consecutive system failures of the current attempt.
	// +optional
	SystemFailures uint32 `json:"systemFailures,omitempty"`

	// CacheStatus is Flyte's core.CatalogCacheStatus (0 DISABLED .. 7 EVICTED).
	// +optional
	CacheStatus CacheStatus `json:"cacheStatus,omitempty"`

	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// PhaseHistory is the timeline of phases, bounded in length.
	// +optional
	PhaseHistory []PhaseTransition `json:"phaseHistory,omitempty"`

	// +optional
	ErrorState *ErrorState `json:"errorState,omitempty"`

	// SignalValue is the serialized value a condition action was signalled with.
	// +optional
	SignalValue []byte `json:"signalValue,omitempty"`

	// SignalledBy names who signalled a condition action.
	// +optional
	SignalledBy string `json:"signalledBy,omitempty"`

	// SignalledAt is when a condition action was signalled.
	// +optional
	SignalledAt *metav1.Time `json:"signalledAt,omitempty"`
}

// TaskAction is one task of a workflow run, executed by the executor.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ta
// +kubebuilder:printcolumn:name="Run",type=string,JSONPath=`.spec.runName`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.actionName`
// +kubebuilder:printcolumn:name="TaskType",type=string,JSONPath=`.spec.taskType`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=='Progressing')].reason`
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=`.status.attempts`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Succeeded",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=='Succeeded')].status`
// +kubebuilder:printcolumn:name="Failed",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=='Failed')].status`
type TaskAction struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TaskActionSpec `json:"spec"`
	// +optional
	Status TaskActionStatus `json:"status,omitempty"`
}

// TaskActionList is a list of TaskActions.
// +kubebuilder:object:root=true
type TaskActionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TaskAction `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TaskAction{}, &TaskActionList{})
}
