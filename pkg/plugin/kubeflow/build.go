package kubeflow

import (
	"fmt"
	"strconv"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	kfidl "github.com/taskaction/executor/gen/flyteidl2/plugins/kubeflow"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/quantity"
	"github.com/taskaction/executor/pkg/task"
)

// CodeBadTaskSpecification is Flyte's code for a task its plugin cannot
// turn into a job.
const CodeBadTaskSpecification = container.CodeBadTaskSpecification

// The typed form's keys (spec.template.config): the custom part as JSON, and
// its task type version (Flyte's form has both in its template).
const (
	ConfigCustom          = "custom"
	ConfigTaskTypeVersion = "taskTypeVersion"
)

func badSpec(format string, a ...any) error {
	return &plugin.LaunchError{Err: plugin.ExecError{Code: CodeBadTaskSpecification, Kind: flytev1.ErrorKindUser,
		Message: fmt.Sprintf(format, a...)}}
}

// builder builds one attempt's job.
type builder struct {
	tc   plugin.TaskContext
	name string
}

// custom decodes the task's custom part into the message of its task type
// version, v0 or v1 (Flyte reads only those two). Fields it does not know are
// ignored, as Flyte's decoder ignores them.
func (b builder) custom(v0, v1 proto.Message) (version int32, err error) {
	t := b.tc.Task
	var raw []byte
	if t.Form == task.FormFlyte {
		tmpl := &core.TaskTemplate{}
		if err := proto.Unmarshal(t.Raw, tmpl); err != nil {
			return 0, badSpec("the task template cannot be read: %v", err)
		}
		if tmpl.GetCustom() == nil {
			return 0, badSpec("task type %s needs its configuration in the template's custom part, which is empty", t.Type)
		}
		if raw, err = protojson.Marshal(tmpl.GetCustom()); err != nil {
			return 0, badSpec("the template's custom part cannot be read: %v", err)
		}
		version = tmpl.GetTaskTypeVersion()
	} else {
		s, ok := t.Config[ConfigCustom]
		if !ok {
			return 0, badSpec("spec.template.config.%s is required: the %s job as the JSON of Flyte's message", ConfigCustom, t.Type)
		}
		raw, version = []byte(s), 1
		if v, ok := t.Config[ConfigTaskTypeVersion]; ok {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				return 0, badSpec("spec.template.config.%s: %q is not a number", ConfigTaskTypeVersion, v)
			}
			version = int32(n)
		}
	}
	var msg proto.Message
	switch version {
	case 0:
		msg = v0
	case 1:
		msg = v1
	default:
		return 0, badSpec("task type %s has no task type version %d (0 and 1 are known)", t.Type, version)
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, msg); err != nil {
		return 0, badSpec("the %s job's configuration is not a %s: %v", t.Type, msg.ProtoReflect().Descriptor().FullName(), err)
	}
	return version, nil
}

// replicaOverride is what a replica group changes in the task's pod.
type replicaOverride struct {
	// image replaces the primary container's image when set.
	image string
	// resources, when set, are the group's (completed by the defaults): each
	// of their entries replaces the task's.
	resources *core.Resources
	// args replace the primary container's args when setArgs; clearCommand
	// drops its command.
	args         []string
	setArgs      bool
	clearCommand bool
}

// replicaTemplate is a replica group's pod template: the task's pod as the
// container plugin builds it (environment, placeholders, resources and their
// defaults, scheduling, labels, secrets), changed by o, with its primary
// container renamed to containerName, the name the operator looks for.
func (b builder) replicaTemplate(containerName string, o replicaOverride) (corev1.PodTemplateSpec, error) {
	t := *b.tc.Task
	primary := t.PrimaryContainerName
	if primary == "" {
		primary = container.PodName(b.tc.TaskAction.Name, b.tc.Attempt)
	}
	var res *corev1.ResourceRequirements
	if o.resources != nil {
		r, err := replicaResources(o.resources, b.tc.Settings)
		if err != nil {
			return corev1.PodTemplateSpec{}, err
		}
		res = &r
	}
	apply := func(image *string, command, args *[]string, r *corev1.ResourceRequirements) {
		if o.image != "" {
			*image = o.image
		}
		if o.setArgs {
			*args = append([]string(nil), o.args...)
		}
		if o.clearCommand {
			*command = nil
		}
		if res != nil {
			r.Requests = container.MergeResourceList(r.Requests, res.Requests)
			r.Limits = container.MergeResourceList(r.Limits, res.Limits)
		}
	}
	if t.Container != nil {
		c := *t.Container
		c.Resources = *c.Resources.DeepCopy()
		apply(&c.Image, &c.Command, &c.Args, &c.Resources)
		t.Container = &c
	}
	if t.PodSpec != nil {
		// The primary container may be in the pod spec too (a pod-spec task,
		// or a container under a pod template): changed there as well, so
		// that the container plugin's merge of the two keeps the change.
		t.PodSpec = t.PodSpec.DeepCopy()
		for i := range t.PodSpec.Containers {
			if c := &t.PodSpec.Containers[i]; c.Name == primary {
				apply(&c.Image, &c.Command, &c.Args, &c.Resources)
			}
		}
	}
	tc := b.tc
	tc.Task = &t
	pod, err := container.BuildPod(tc)
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	idx := -1
	for i, c := range pod.Spec.Containers {
		switch c.Name {
		case primary:
			idx = i
		case containerName:
			return corev1.PodTemplateSpec{}, badSpec("the pod spec has a container named %q besides the primary container %q: the training operator runs the container of that name", containerName, primary)
		}
	}
	if idx < 0 {
		return corev1.PodTemplateSpec{}, badSpec("the primary container %q is not in the pod", primary)
	}
	pod.Spec.Containers[idx].Name = containerName
	// The operator names the container, not this annotation (Flyte's replica
	// templates do not have it).
	delete(pod.Annotations, container.AnnotationPrimaryContainer)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations},
		Spec:       pod.Spec,
	}, nil
}

// objectMeta is the job's metadata: its name, the TaskAction as its
// controller, and the labels and annotations of its pods (the executor's
// labels among them, flyte.org/managed for its watch).
func (b builder) objectMeta(tmpl corev1.PodTemplateSpec) metav1.ObjectMeta {
	copyMap := func(m map[string]string) map[string]string {
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	return metav1.ObjectMeta{
		Name: b.name, Namespace: b.tc.TaskAction.Namespace,
		Labels: copyMap(tmpl.Labels), Annotations: copyMap(tmpl.Annotations),
		OwnerReferences: []metav1.OwnerReference{plugin.ControllerRef(b.tc.TaskAction)},
	}
}

// replicaGroup is the part of Flyte's replica messages (the common spec, or
// the deprecated fields before it) a group is built from.
type replicaGroup interface {
	GetCommon() *plugins.CommonReplicaSpec
	GetReplicas() int32
	GetImage() string
	GetResources() *core.Resources
	GetRestartPolicy() plugins.RestartPolicy
}

// groupSpec reads a group's settings: the common spec when set, else the
// deprecated fields it replaced (as Flyte reads them). g may be nil.
func groupSpec(g replicaGroup) (replicas int32, o replicaOverride, restart plugins.RestartPolicy) {
	if g == nil {
		return 0, o, 0
	}
	if c := g.GetCommon(); c != nil {
		return c.GetReplicas(), replicaOverride{image: c.GetImage(), resources: c.GetResources()}, c.GetRestartPolicy()
	}
	return g.GetReplicas(), replicaOverride{image: g.GetImage(), resources: g.GetResources()}, g.GetRestartPolicy()
}

// restartPolicy is the operator's restart policy of Flyte's (unset: Never).
func restartPolicy(p plugins.RestartPolicy) (kubeflowv1.RestartPolicy, error) {
	switch p {
	case plugins.RestartPolicy_RESTART_POLICY_NEVER:
		return kubeflowv1.RestartPolicyNever, nil
	case plugins.RestartPolicy_RESTART_POLICY_ON_FAILURE:
		return kubeflowv1.RestartPolicyOnFailure, nil
	case plugins.RestartPolicy_RESTART_POLICY_ALWAYS:
		return kubeflowv1.RestartPolicyAlways, nil
	}
	return "", badSpec("unknown restart policy %d", p)
}

// runPolicy is the job's run policy as Flyte sets it from its message: the
// clean pod policy always (unset: None), the numbers when not zero.
func runPolicy(rp *kfidl.RunPolicy) (kubeflowv1.RunPolicy, error) {
	var out kubeflowv1.RunPolicy
	if rp == nil {
		return out, nil
	}
	var clean kubeflowv1.CleanPodPolicy
	switch rp.GetCleanPodPolicy() {
	case kfidl.CleanPodPolicy_CLEANPOD_POLICY_NONE:
		clean = kubeflowv1.CleanPodPolicyNone
	case kfidl.CleanPodPolicy_CLEANPOD_POLICY_RUNNING:
		clean = kubeflowv1.CleanPodPolicyRunning
	case kfidl.CleanPodPolicy_CLEANPOD_POLICY_ALL:
		clean = kubeflowv1.CleanPodPolicyAll
	default:
		return out, badSpec("unknown clean pod policy %d", rp.GetCleanPodPolicy())
	}
	out.CleanPodPolicy = &clean
	if v := rp.GetBackoffLimit(); v != 0 {
		out.BackoffLimit = &v
	}
	if v := rp.GetActiveDeadlineSeconds(); v != 0 {
		d := int64(v)
		out.ActiveDeadlineSeconds = &d
	}
	if v := rp.GetTtlSecondsAfterFinished(); v != 0 {
		out.TTLSecondsAfterFinished = &v
	}
	return out, nil
}

// replicaResources are a replica group's resources as Flyte completes them
// before they replace the task's: CPU, memory, GPU (under the generic name,
// which the pod builder renames to the task's accelerator) and ephemeral
// storage, zero meaning unset, completed as the container plugin completes
// a container's (container.CompleteResources). Not task.ResourceRequirements:
// other kinds are skipped before their value is read, and errors name the
// replica group's field, as they always have.
func replicaResources(r *core.Resources, s plugin.Settings) (corev1.ResourceRequirements, error) {
	out := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, side := range []struct {
		entries []*core.Resources_ResourceEntry
		list    corev1.ResourceList
		field   string
	}{{r.GetRequests(), out.Requests, "requests"}, {r.GetLimits(), out.Limits, "limits"}} {
		for i, e := range side.entries {
			name, ok := task.ResourceName(e.GetName())
			if !ok {
				continue
			}
			q, err := quantity.Parse(e.GetValue())
			if err != nil {
				return out, badSpec("replica resources %s[%d] (%s): %v", side.field, i, e.GetName(), err)
			}
			if !q.IsZero() {
				side.list[name] = q
			}
		}
	}
	return out, container.CompleteResources(out, s, task.ResourceGPU, corev1.ResourceEphemeralStorage)
}
