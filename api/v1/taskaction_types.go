package v1

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ActionType says what kind of action a TaskAction runs.
// +kubebuilder:validation:Enum=task;condition
type ActionType string

const (
	ActionTypeTask      ActionType = "task"
	ActionTypeCondition ActionType = "condition"
)

// TaskActionSpec is one attempt-spanning execution of one task of a workflow run.
//
// "A task carries exactly one of taskTemplate and template" is deliberately
// not a CEL rule here: a rule on spec makes the API server read the
// format: byte fields below as URL-safe base64 (kubernetes/kube-openapi#633)
// and refuse every template whose standard base64 holds '+' or '/' — most of
// what Flyte writes. The admission webhook and the reconciler (pkg/task)
// enforce it with the same message.
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

	// InputURI is where the task's inputs are: a folder holding inputs.pb, or
	// the inputs.pb file itself. No length limit: Flyte's control plane sets none.
	// +optional
	InputURI string `json:"inputUri,omitempty"`

	// RunOutputBase is the prefix under which every action of the run writes its
	// outputs (the executor adds a shard, the action and the attempt).
	// +optional
	RunOutputBase string `json:"runOutputBase,omitempty"`

	// CacheKey, when set, makes the executor consult the task-output cache.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	CacheKey string `json:"cacheKey,omitempty"`

	// EnvVars are run-scoped environment variables for the task's containers.
	// Keys are not checked here (Flyte's control plane copies them from the run);
	// the API server checks them when the pod is created.
	// +optional
	EnvVars map[string]string `json:"envVars,omitempty"`

	// Interruptible overrides whether the task may run on interruptible capacity.
	// +optional
	Interruptible *bool `json:"interruptible,omitempty"`

	// TaskTemplate is Flyte's task template: a protobuf-serialized
	// flyteidl2.core.TaskTemplate (base64 in JSON), as Flyte's actions service
	// writes it. A task carries either this or template.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=byte
	// +optional
	TaskTemplate TaskTemplateBytes `json:"taskTemplate,omitempty"`

	// Template is the typed, human-writable task template. A task carries
	// either this or taskTemplate.
	// +optional
	Template *TypedTaskTemplate `json:"template,omitempty"`

	// ConditionSpec is Flyte's protobuf-serialized flyteidl2.workflow.ConditionAction
	// of a condition action (actionType: condition).
	// +optional
	ConditionSpec []byte `json:"conditionSpec,omitempty"`
}

// TaskTemplateBytes is Flyte's serialized core.TaskTemplate: a base64 string in JSON.
type TaskTemplateBytes []byte

// UnmarshalJSON reads the base64 string. Anything else an older CRD let into
// the field (the typed template lived here as an object) is kept as the JSON
// text it was, for the task decoder to report on that TaskAction alone, so
// that reading TaskActions never fails.
func (b *TaskTemplateBytes) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*b = nil
		return nil
	}
	var v []byte
	if err := json.Unmarshal(data, &v); err == nil {
		*b = v
		return nil
	}
	*b = append(TaskTemplateBytes(nil), data...)
	return nil
}

// TypedTaskTemplate is the typed, human-writable description of a task.
type TypedTaskTemplate struct {
	// ID names the task and its version.
	// +optional
	ID TaskID `json:"id,omitempty"`

	// Retries is the number of user retries; the task runs at most retries+1 times.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Retries int32 `json:"retries,omitempty"`

	// Timeout bounds one attempt, counted from the attempt's start, in Go
	// duration syntax (e.g. 90s, 1h30m; units ns, us, ms, s, m, h). It is a
	// string, checked here and parsed by the executor, so that no stored value
	// can stop the executor from reading TaskActions.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == '0' || self.matches('^([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h)(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))*$')",message="timeout must be a non-negative Go duration such as 90s, 1h30m or 500ms (units ns, us, ms, s, m, h; days are not a unit)"
	// +optional
	Timeout *string `json:"timeout,omitempty"`

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
// +kubebuilder:validation:Enum=ANY;ENV_VAR;FILE
type MountRequirement string

const (
	MountAny    MountRequirement = "ANY"
	MountEnvVar MountRequirement = "ENV_VAR"
	MountFile   MountRequirement = "FILE"
)

// Secret is one secret a task needs.
type Secret struct {
	// +optional
	Group string `json:"group,omitempty"`
	// +optional
	GroupVersion string `json:"groupVersion,omitempty"`
	// +kubebuilder:validation:MinLength=1
	// +required
	Key string `json:"key"`
	// +optional
	MountRequirement MountRequirement `json:"mountRequirement,omitempty"`
	// EnvVar names the environment variable the secret is exposed as (ENV_VAR mounts).
	// +optional
	EnvVar string `json:"envVar,omitempty"`
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
	// Spec is a Kubernetes pod spec merged under the generated pod.
	// +optional
	Spec *PodSpecDocument `json:"spec,omitempty"`
}

// PodSpecDocument is a Kubernetes pod spec kept as the JSON the client wrote.
// The executor decodes it strictly when it runs the task (a mistake fails
// that TaskAction with InvalidSpec naming the field), so that a pod spec the
// Go types cannot read never stops the executor from reading TaskActions.
// The API server checks only its outline: containers and initContainers are
// lists of objects.
// +kubebuilder:pruning:PreserveUnknownFields
type PodSpecDocument struct {
	// Containers is declared for its outline only; Raw holds the value.
	// +optional
	Containers []runtime.RawExtension `json:"containers,omitempty"`
	// InitContainers is declared for its outline only; Raw holds the value.
	// +optional
	InitContainers []runtime.RawExtension `json:"initContainers,omitempty"`

	// Raw is the pod spec's JSON, exactly as stored.
	Raw []byte `json:"-"`
}

// UnmarshalJSON keeps the document as it is; it never fails on a well-formed
// JSON value, whatever its shape.
func (d *PodSpecDocument) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = PodSpecDocument{}
		return nil
	}
	d.Raw = append([]byte(nil), b...)
	d.Containers, d.InitContainers = nil, nil
	return nil
}

// MarshalJSON writes the document back as it was read.
func (d PodSpecDocument) MarshalJSON() ([]byte, error) {
	if len(d.Raw) == 0 {
		return []byte("{}"), nil
	}
	return d.Raw, nil
}

// PodSpecDocumentOf is the document of spec, for clients that build TaskActions in Go.
func PodSpecDocumentOf(spec *corev1.PodSpec) (*PodSpecDocument, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return &PodSpecDocument{Raw: b}, nil
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

// Each integer of the status admits exactly the range of its Go type (which
// is Flyte's): the API server refuses a value the executor could not decode,
// and takes every value Flyte's actions service can write. The unsigned
// 32-bit ones are format int64 in the schema, since the API server holds a
// format int32 field to int32's range.

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
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +optional
	PluginStateVersion uint8 `json:"pluginStateVersion,omitempty"`

	// PluginPhase is the plugin's view of the phase last reported.
	// +optional
	PluginPhase string `json:"pluginPhase,omitempty"`

	// PluginPhaseVersion is the version of the last event reported for the current attempt.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:Format=int64
	// +optional
	PluginPhaseVersion uint32 `json:"pluginPhaseVersion,omitempty"`

	// Attempts is the current attempt, 1-based.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:Format=int64
	// +optional
	Attempts uint32 `json:"attempts,omitempty"`

	// SystemFailures counts consecutive system failures of the current attempt.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:Format=int64
	// +optional
	SystemFailures uint32 `json:"systemFailures,omitempty"`

	// CacheStatus is Flyte's core.CatalogCacheStatus (0 DISABLED .. 7 EVICTED).
	// +kubebuilder:validation:Minimum=-2147483648
	// +kubebuilder:validation:Maximum=2147483647
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

	// decodeErr is what could not be decoded when the object was read (DecodeError).
	decodeErr *DecodeError `json:"-"`
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
