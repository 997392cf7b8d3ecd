// Package task is the executor's internal model of a task: what to run, for
// how long, how often, as whom, and what it may reuse. A TaskAction carries its
// task in one of two forms, the typed, human-writable spec.template or Flyte's
// serialized core.TaskTemplate in spec.taskTemplate; both decode into one Task,
// so that the reconciler and the plugins never see the difference.
package task

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Form says which field of the TaskAction a Task was decoded from.
type Form string

const (
	// FormTyped is the typed, human-writable template.
	FormTyped Form = "typed"
	// FormFlyte is Flyte's proto-serialized core.TaskTemplate.
	FormFlyte Form = "flyte"
)

// Identifier names a task definition.
type Identifier struct {
	Org     string
	Project string
	Domain  string
	Name    string
	Version string
}

// MountRequirement says how a secret reaches the task's containers.
type MountRequirement string

const (
	// MountAny lets the secret manager choose (Flyte's ANY).
	MountAny    MountRequirement = "ANY"
	MountEnvVar MountRequirement = "ENV_VAR"
	MountFile   MountRequirement = "FILE"
)

// Secret is one secret the task needs.
type Secret struct {
	Group        string
	GroupVersion string
	Key          string
	Mount        MountRequirement
	// EnvVar, when set, names the environment variable the secret is exposed as.
	EnvVar string
}

// Container is the task's primary container as the template describes it.
type Container struct {
	Image     string
	Command   []string
	Args      []string
	Env       []corev1.EnvVar
	Resources corev1.ResourceRequirements
}

// Cache says whether and how the task's outputs may be reused.
type Cache struct {
	// Enabled is Flyte's metadata.discoverable (or the typed form's cacheKey).
	Enabled bool
	// Version is the discovery version: a new version never reuses old outputs.
	Version string
	// Serializable makes concurrent identical runs wait for one another.
	Serializable bool
	// IgnoreInputVars are inputs left out of the cache key.
	IgnoreInputVars []string
}

// GPUAccelerator is the accelerator a task asks for (Flyte's GPUAccelerator).
type GPUAccelerator struct {
	// Device is the device model (e.g. "A100"), matched against node labels.
	Device string
	// DeviceClass is the vendor family: NVIDIA_GPU (default), GOOGLE_TPU,
	// AMAZON_NEURON, AMD_GPU, HABANA_GAUDI.
	DeviceClass string
	// Unpartitioned asks for a whole device; PartitionSize for a slice of one.
	Unpartitioned bool
	PartitionSize string
}

// SharedMemory is a memory-backed volume mounted into the primary container.
type SharedMemory struct {
	MountPath string
	MountName string
	// SizeLimit is a Kubernetes quantity; empty means no limit.
	SizeLimit string
}

// ExtendedResources are resources beyond the container's requests and limits.
type ExtendedResources struct {
	GPU          *GPUAccelerator
	SharedMemory *SharedMemory
}

// Task is one decoded task template.
type Task struct {
	Form Form
	ID   Identifier
	// Type is the task type that selects the plugin (template type, else spec.taskType).
	Type string
	// Retries is the number of user retries: at most Retries+1 attempts.
	Retries int32
	// Timeout bounds one attempt; zero means none.
	Timeout       time.Duration
	Interruptible bool
	Cache         Cache

	// Container is the primary container (nil when the pod spec carries it).
	Container *Container
	// PodSpec, when set, is the template's pod spec (Flyte's K8sPod, the typed podTemplate.spec).
	PodSpec *corev1.PodSpec
	// PodLabels and PodAnnotations are the template's pod metadata.
	PodLabels      map[string]string
	PodAnnotations map[string]string
	// PrimaryContainerName names the container of PodSpec that is the task's
	// own; empty means the pod builder's default (the pod's name, as Flyte names it).
	PrimaryContainerName string
	// Extended are the accelerator and shared memory the task asks for.
	Extended ExtendedResources

	// ServiceAccount is the template's run-as service account ("" = resolve by policy).
	ServiceAccount string
	Secrets        []Secret
	// Config holds plugin-specific settings.
	Config map[string]string

	// Interface is the serialized core.TypedInterface (Flyte form), used in the cache key.
	Interface []byte
	// Raw is the serialized core.TaskTemplate (Flyte form), kept for hashing and plugins that need it.
	Raw []byte
}

// MaxAttempts is how many attempts the task may make.
func (t *Task) MaxAttempts() int32 {
	if t == nil || t.Retries < 0 {
		return 1
	}
	return t.Retries + 1
}
