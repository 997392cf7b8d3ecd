package task

import (
	"encoding/json"
	"math"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/quantity"
)

// Task types whose pod comes from the template in a way of their own.
const (
	TypeSidecar      = "sidecar"
	TypeRawContainer = "raw-container"
)

// PrimaryContainerConfigKey is the template config key that names the
// primary container of a pod-spec task (Flyte's key).
const PrimaryContainerConfigKey = "primary_container_name"

// ResourceGPU is the generic accelerator resource name a Flyte template
// uses; the pod builder renames it to the device class's resource.
const ResourceGPU corev1.ResourceName = "gpu"

// fromFlyte decodes Flyte's serialized core.TaskTemplate; field is its path
// in the TaskAction, for error messages.
func fromFlyte(raw []byte, field string) (*Task, error) {
	// A serialized TaskTemplate never starts with '{' or '[' (they would be
	// groups of fields 15 and 11): such bytes are JSON an older CRD admitted.
	if raw[0] == '{' || raw[0] == '[' {
		return nil, fieldErr(field, "holds JSON, not a serialized flyteidl2.core.TaskTemplate (the typed template belongs in spec.template)")
	}
	tmpl := &core.TaskTemplate{}
	if err := proto.Unmarshal(raw, tmpl); err != nil {
		return nil, fieldErr(field, "is not a serialized flyteidl2.core.TaskTemplate: %v", err)
	}
	t := &Task{
		Form:   FormFlyte,
		Type:   tmpl.GetType(),
		Config: tmpl.GetConfig(),
		Raw:    raw,
	}
	if id := tmpl.GetId(); id != nil {
		t.ID = Identifier{Org: id.GetOrg(), Project: id.GetProject(), Domain: id.GetDomain(), Name: id.GetName(), Version: id.GetVersion()}
	}
	if err := decodeMetadata(t, tmpl.GetMetadata(), field+".metadata"); err != nil {
		return nil, err
	}
	if iface := tmpl.GetInterface(); iface != nil {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(iface)
		if err != nil {
			return nil, fieldErr(field+".interface", "cannot be serialized: %v", err)
		}
		t.Interface = b
	}
	if sc := tmpl.GetSecurityContext(); sc != nil {
		t.ServiceAccount = sc.GetRunAs().GetK8SServiceAccount()
		for i, s := range sc.GetSecrets() {
			name, ok := core.Secret_MountType_name[int32(s.GetMountRequirement())]
			if !ok {
				return nil, fieldErr(field+".securityContext.secrets["+itoa(i)+"].mountRequirement", "unknown mount requirement %d", s.GetMountRequirement())
			}
			t.Secrets = append(t.Secrets, Secret{Group: s.GetGroup(), GroupVersion: s.GetGroupVersion(), Key: s.GetKey(), Mount: MountRequirement(name), EnvVar: s.GetEnvVar()})
		}
	}
	if ext := tmpl.GetExtendedResources(); ext != nil {
		if g := ext.GetGpuAccelerator(); g != nil {
			t.Extended.GPU = &GPUAccelerator{Device: g.GetDevice(), DeviceClass: g.GetDeviceClass().String(), Unpartitioned: g.GetUnpartitioned(), PartitionSize: g.GetPartitionSize()}
		}
		if m := ext.GetSharedMemory(); m != nil {
			t.Extended.SharedMemory = &SharedMemory{MountPath: m.GetMountPath(), MountName: m.GetMountName(), SizeLimit: m.GetSizeLimit()}
			if m.GetSizeLimit() != "" {
				if _, err := quantity.Parse(m.GetSizeLimit()); err != nil {
					return nil, fieldErr(field+".extendedResources.sharedMemory.sizeLimit", "%v", err)
				}
			}
		}
	}
	if err := decodeTarget(t, tmpl, field); err != nil {
		return nil, err
	}
	return t, nil
}

func decodeMetadata(t *Task, md *core.TaskMetadata, field string) error {
	if md == nil {
		return nil
	}
	r := md.GetRetries().GetRetries()
	if r > math.MaxInt32 {
		return fieldErr(field+".retries.retries", "%d is too large", r)
	}
	t.Retries = int32(r)
	if d := md.GetTimeout(); d != nil {
		if err := d.CheckValid(); err != nil {
			return fieldErr(field+".timeout", "%v", err)
		}
		if d.AsDuration() < 0 {
			return fieldErr(field+".timeout", "must not be negative, got %v", d.AsDuration())
		}
		t.Timeout = d.AsDuration()
	}
	if v, ok := md.GetInterruptibleValue().(*core.TaskMetadata_Interruptible); ok {
		t.Interruptible = v.Interruptible
	}
	t.Cache = Cache{
		Enabled:         md.GetDiscoverable(),
		Version:         md.GetDiscoveryVersion(),
		Serializable:    md.GetCacheSerializable(),
		IgnoreInputVars: md.GetCacheIgnoreInputVars(),
	}
	return nil
}

// decodeTarget reads what runs: the container, or a pod spec with its
// primary container, by Flyte's rules for the task type.
func decodeTarget(t *Task, tmpl *core.TaskTemplate, field string) error {
	if tmpl.GetType() == TypeSidecar && tmpl.GetTaskTypeVersion() == 0 {
		// The oldest sidecar form: the pod spec, primary container and pod
		// metadata are all in custom.
		var job struct {
			PodSpec              json.RawMessage   `json:"podSpec"`
			PrimaryContainerName string            `json:"primaryContainerName"`
			Annotations          map[string]string `json:"annotations"`
			Labels               map[string]string `json:"labels"`
		}
		b, err := structJSON(tmpl.GetCustom())
		if err == nil {
			err = json.Unmarshal(b, &job)
		}
		if err != nil {
			return fieldErr(field+".custom", "is not a sidecar job: %v", err)
		}
		if len(job.PodSpec) == 0 || string(job.PodSpec) == "null" {
			return fieldErr(field+".custom.podSpec", "is required for a sidecar task")
		}
		spec, err := DecodePodSpec(job.PodSpec, field+".custom.podSpec")
		if err != nil {
			return err
		}
		t.PodSpec, t.PrimaryContainerName = spec, job.PrimaryContainerName
		t.PodLabels, t.PodAnnotations = job.Labels, job.Annotations
		return requirePrimary(t, field+".custom.primaryContainerName")
	}
	if tmpl.GetType() == TypeSidecar && tmpl.GetTaskTypeVersion() == 1 {
		// custom is the pod spec; the config names the primary container.
		b, err := structJSON(tmpl.GetCustom())
		if err != nil {
			return fieldErr(field+".custom", "%v", err)
		}
		spec, err := DecodePodSpec(b, field+".custom")
		if err != nil {
			return err
		}
		t.PodSpec = spec
		t.PrimaryContainerName = tmpl.GetConfig()[PrimaryContainerConfigKey]
		if md := tmpl.GetK8SPod().GetMetadata(); md != nil {
			t.PodLabels, t.PodAnnotations = md.GetLabels(), md.GetAnnotations()
		}
		return requirePrimary(t, field+".config."+PrimaryContainerConfigKey)
	}

	switch target := tmpl.GetTarget().(type) {
	case *core.TaskTemplate_Container:
		c := target.Container
		if c.GetDataConfig() != nil {
			return fieldErr(field+".container.dataConfig", "co-pilot data loading is not supported by this executor")
		}
		res, err := ResourceRequirements(c.GetResources(), field+".container.resources")
		if err != nil {
			return err
		}
		env := make([]corev1.EnvVar, 0, len(c.GetEnv()))
		for _, kv := range c.GetEnv() {
			env = append(env, corev1.EnvVar{Name: kv.GetKey(), Value: kv.GetValue()})
		}
		t.Container = &Container{Image: c.GetImage(), Command: c.GetCommand(), Args: c.GetArgs(), Env: env, Resources: res}
		if t.Container.Image == "" {
			return fieldErr(field+".container.image", "is required")
		}
		return nil
	case *core.TaskTemplate_K8SPod:
		pod := target.K8SPod
		if pod.GetDataConfig() != nil {
			return fieldErr(field+".k8sPod.dataConfig", "co-pilot data loading is not supported by this executor")
		}
		if pod.GetPodSpec() == nil {
			return fieldErr(field+".k8sPod.podSpec", "is required for a pod task")
		}
		b, err := structJSON(pod.GetPodSpec())
		if err != nil {
			return fieldErr(field+".k8sPod.podSpec", "%v", err)
		}
		spec, err := DecodePodSpec(b, field+".k8sPod.podSpec")
		if err != nil {
			return err
		}
		t.PodSpec = spec
		t.PrimaryContainerName = tmpl.GetConfig()[PrimaryContainerConfigKey]
		if t.PrimaryContainerName == "" {
			t.PrimaryContainerName = pod.GetPrimaryContainerName()
		}
		if md := pod.GetMetadata(); md != nil {
			t.PodLabels, t.PodAnnotations = md.GetLabels(), md.GetAnnotations()
		}
		return requirePrimary(t, field+".config."+PrimaryContainerConfigKey)
	}
	return fieldErr(field, "has no container or k8sPod target")
}

// requirePrimary checks that a pod-spec task names a primary container that
// its pod spec has.
func requirePrimary(t *Task, field string) error {
	if t.PrimaryContainerName == "" {
		return fieldErr(field, "must name the primary container of the pod spec")
	}
	for _, c := range t.PodSpec.Containers {
		if c.Name == t.PrimaryContainerName {
			return nil
		}
	}
	return fieldErr(field, "names container %q, which the pod spec does not have", t.PrimaryContainerName)
}

func structJSON(s *structpb.Struct) ([]byte, error) {
	if s == nil {
		return []byte("{}"), nil
	}
	return protojson.Marshal(s)
}

// ResourceRequirements converts Flyte's resource entries by Flyte's rules:
// CPU, memory, GPU (as the generic "gpu", renamed by the pod builder) and
// ephemeral storage (ResourceName); zero quantities count as unset; other
// kinds are ignored. A value that is not a quantity is a *FieldError naming
// the entry under field.
func ResourceRequirements(r *core.Resources, field string) (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	if r == nil {
		return out, nil
	}
	var err error
	if out.Requests, err = resourceList(r.GetRequests(), field+".requests"); err != nil {
		return out, err
	}
	if out.Limits, err = resourceList(r.GetLimits(), field+".limits"); err != nil {
		return out, err
	}
	return out, nil
}

func resourceList(entries []*core.Resources_ResourceEntry, field string) (corev1.ResourceList, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for i, e := range entries {
		q, err := quantity.Parse(e.GetValue())
		if err != nil {
			return nil, fieldErr(field+"["+itoa(i)+"]", "%s value %v", e.GetName(), err)
		}
		if name, ok := ResourceName(e.GetName()); ok && !q.IsZero() {
			out[name] = q
		}
	}
	return out, nil
}

// ResourceName is the Kubernetes name of a template's resource entry as
// Flyte converts it: CPU, memory, GPU (the generic ResourceGPU, which the pod
// builder names as the accelerator's resource) and ephemeral storage; other
// kinds are not converted (false).
func ResourceName(n core.Resources_ResourceName) (corev1.ResourceName, bool) {
	switch n {
	case core.Resources_CPU:
		return corev1.ResourceCPU, true
	case core.Resources_MEMORY:
		return corev1.ResourceMemory, true
	case core.Resources_GPU:
		return ResourceGPU, true
	case core.Resources_EPHEMERAL_STORAGE:
		return corev1.ResourceEphemeralStorage, true
	}
	return "", false
}
