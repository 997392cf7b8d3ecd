package ray

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/podsecurity"
	"github.com/taskaction/executor/pkg/quantity"
	"github.com/taskaction/executor/pkg/task"
)

// The containers of the Ray pods, Flyte's names.
const (
	HeadContainerName      = "ray-head"
	WorkerContainerName    = "ray-worker"
	SubmitterContainerName = "ray-job-submitter"
)

// ConfigKey holds, in a typed TaskAction's spec.template.config, the RayJob
// message as JSON (what a Flyte template carries in custom); without it the
// cluster is a head alone.
const ConfigKey = "rayJob"

// CodeBadTaskSpecification is the error code of a task that cannot become a RayJob.
const CodeBadTaskSpecification = container.CodeBadTaskSpecification

// CodePodSecurityViolation: a head or worker pod the executor's pod-security
// policy refuses.
const CodePodSecurityViolation = container.CodePodSecurityViolation

// The Ray logs directory a logs sidecar reads, and the volume that holds it
// when the head's container mounts none there.
const (
	rayStateMountPath = "/tmp/ray"
	rayStateVolume    = "system-ray-state"
)

func badSpec(format string, a ...any) error {
	return &plugin.LaunchError{Err: plugin.ExecError{Code: CodeBadTaskSpecification, Kind: flytev1.ErrorKindUser,
		Message: fmt.Sprintf(format, a...)}}
}

// Build is the RayJob of attempt tc.Attempt of tc.TaskAction, built from the
// decoded task by the rules of Flyte's Ray plugin (the differences are listed
// in docs/engines/ray.md): the task's pod (container.BuildPod) becomes the
// head's and each worker group's pod template, each with its group's pod spec
// laid over it. It modifies neither. A task that cannot become a RayJob gives
// a *plugin.LaunchError (BadTaskSpecification, permanent).
func Build(tc plugin.TaskContext, cfg Config) (*rayv1.RayJob, error) {
	ta := tc.TaskAction
	if ta == nil {
		return nil, fmt.Errorf("no TaskAction in the task context")
	}
	if tc.Task == nil {
		t, err := task.FromTaskAction(ta)
		if err != nil {
			return nil, badSpec("%v", err)
		}
		tc.Task = t
	}
	spec, err := JobSpec(tc.Task)
	if err != nil {
		return nil, err
	}
	attempt := max(tc.Attempt, 1)
	primary := tc.Task.PrimaryContainerName
	if primary == "" {
		primary = container.PodName(ta.Name, attempt)
	}
	// The policy judges the head and worker pods as they are finally built.
	policy := tc.Settings.PodSecurity
	tc.Settings.PodSecurity = nil
	base, err := container.BuildPod(tc)
	if err != nil {
		return nil, err
	}
	cluster := spec.GetRayCluster()
	b := builder{tc: tc, cfg: cfg, base: base, primary: primary, policy: policy}

	head, err := b.template(cluster.GetHeadGroupSpec().GetExtendedResources(), cluster.GetHeadGroupSpec().GetK8SPod(), "head", b.headContainer)
	if err != nil {
		return nil, err
	}
	enableIngress := true
	autoscaling := cluster.GetEnableAutoscaling()
	clusterSpec := &rayv1.RayClusterSpec{
		HeadGroupSpec: rayv1.HeadGroupSpec{
			Template:       head,
			ServiceType:    corev1.ServiceType(cfg.ServiceType),
			EnableIngress:  &enableIngress,
			RayStartParams: headStartParams(cluster.GetHeadGroupSpec(), cfg),
		},
		WorkerGroupSpecs:        []rayv1.WorkerGroupSpec{},
		EnableInTreeAutoscaling: &autoscaling,
	}
	if clusterSpec.AutoscalerOptions, err = autoscalerOptions(cluster.GetAutoscalerOptions()); err != nil {
		return nil, err
	}
	for i, g := range cluster.GetWorkerGroupSpec() {
		tmpl, err := b.template(g.GetExtendedResources(), g.GetK8SPod(), fmt.Sprintf("worker group %d (%s)", i, g.GetGroupName()), b.workerContainer)
		if err != nil {
			return nil, err
		}
		replicas := g.GetReplicas()
		minReplicas, maxReplicas := min(g.GetMinReplicas(), replicas), max(g.GetMaxReplicas(), replicas)
		clusterSpec.WorkerGroupSpecs = append(clusterSpec.WorkerGroupSpecs, rayv1.WorkerGroupSpec{
			GroupName:      g.GetGroupName(),
			Replicas:       &replicas,
			MinReplicas:    &minReplicas,
			MaxReplicas:    &maxReplicas,
			RayStartParams: workerStartParams(g, cfg),
			Template:       tmpl,
		})
	}
	sa := serviceAccount(tc.Task, tc.Settings, cfg)
	clusterSpec.HeadGroupSpec.Template.Spec.ServiceAccountName = sa
	for i := range clusterSpec.WorkerGroupSpecs {
		clusterSpec.WorkerGroupSpecs[i].Template.Spec.ServiceAccountName = sa
	}
	if err := b.check(clusterSpec); err != nil {
		return nil, err
	}

	shutdown, ttl := cfg.ShutdownAfterJobFinishes, cfg.TTLSecondsAfterFinished
	if spec.GetShutdownAfterJobFinishes() {
		shutdown, ttl = true, spec.GetTtlSecondsAfterFinished()
	}
	mode := rayv1.JobSubmissionMode(cfg.SubmissionMode)
	if mode == "" {
		mode = rayv1.K8sJobMode
	}
	runtimeEnv, err := runtimeEnvYAML(spec)
	if err != nil {
		return nil, err
	}
	job := &rayv1.RayJob{
		TypeMeta: metav1.TypeMeta{APIVersion: rayv1.GroupVersion.String(), Kind: "RayJob"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            JobName(ta.Name, attempt),
			Namespace:       ta.Namespace,
			Labels:          maps.Clone(base.Labels),
			Annotations:     withoutPrimaryAnnotation(base.Annotations),
			OwnerReferences: []metav1.OwnerReference{plugin.ControllerRef(ta)},
		},
		Spec: rayv1.RayJobSpec{
			RayClusterSpec:           clusterSpec,
			Entrypoint:               strings.Join(entrypoint(tc.Task, base, primary), " "),
			ShutdownAfterJobFinishes: shutdown,
			TTLSecondsAfterFinished:  ttl,
			RuntimeEnvYAML:           runtimeEnv,
			SubmissionMode:           mode,
		},
	}
	if mode == rayv1.K8sJobMode {
		// Only this mode has a submitter pod.
		job.Spec.SubmitterPodTemplate = b.submitterTemplate(clusterSpec)
	}
	return job, nil
}

// JobSpec is the task's RayJob message: Flyte's template carries it in
// custom (unknown fields are ignored, as Flyte's decoder ignores them); a
// typed template in config[ConfigKey] as JSON.
func JobSpec(t *task.Task) (*plugins.RayJob, error) {
	job := &plugins.RayJob{}
	if t.Form != task.FormFlyte {
		s, ok := t.Config[ConfigKey]
		if !ok {
			return job, nil
		}
		if err := protojson.Unmarshal([]byte(s), job); err != nil {
			return nil, badSpec("spec.template.config.%s is not a flyteidl2.plugins.RayJob in JSON: %v", ConfigKey, err)
		}
		return job, nil
	}
	tmpl := &core.TaskTemplate{}
	if err := proto.Unmarshal(t.Raw, tmpl); err != nil {
		return nil, badSpec("the task template cannot be read: %v", err)
	}
	if tmpl.GetCustom() == nil {
		return nil, badSpec("the task template has no custom part: a Ray task's template carries its flyteidl2.plugins.RayJob there")
	}
	b, err := protojson.Marshal(tmpl.GetCustom())
	if err == nil {
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(b, job)
	}
	if err != nil {
		return nil, badSpec("the task template's custom part is not a flyteidl2.plugins.RayJob: %v", err)
	}
	return job, nil
}

// builder holds what every pod template of one RayJob is built from.
type builder struct {
	tc plugin.TaskContext
	// base is the task's pod as the container plugin builds it; primary is
	// the name of its task container.
	base    *corev1.Pod
	primary string
	cfg     Config
	policy  *podsecurity.Policy
}

// template is the pod template of the head or of a worker group: the task's
// pod (built again with the group's extended resources, if it has any) whose
// task container ray becomes, with the group's pod spec laid over it and
// the placement rules applied again to the result.
func (b builder) template(ext *core.ExtendedResources, k8sPod *core.K8SPod, what string, ray func(*corev1.PodSpec, int)) (corev1.PodTemplateSpec, error) {
	pod, gpu, err := b.groupPod(ext, what)
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	spec := pod.Spec
	idx := -1
	for i := range spec.Containers {
		if spec.Containers[i].Name == b.primary {
			idx = i
		}
	}
	if idx < 0 {
		return corev1.PodTemplateSpec{}, badSpec("%s: the task's pod has no container %q", what, b.primary)
	}
	if idx > 0 {
		// KubeRay takes the first container for Ray's (its command, the
		// submitter's image, the autoscaler's).
		c := spec.Containers[idx]
		copy(spec.Containers[1:idx+1], spec.Containers[:idx])
		spec.Containers[0] = c
	}
	ray(&spec, 0)
	if ps := k8sPod.GetPodSpec(); ps != nil {
		raw, err := protojson.Marshal(ps)
		if err != nil {
			return corev1.PodTemplateSpec{}, badSpec("%s: k8s_pod.pod_spec: %v", what, err)
		}
		overlay, err := task.DecodePodSpec(raw, what+" k8s_pod.pod_spec")
		if err != nil {
			return corev1.PodTemplateSpec{}, badSpec("%v", err)
		}
		spec = *overlayPodSpec(&spec, overlay)
	}
	// The group's pod spec may ask for an accelerator or add node selector
	// terms: place it as its own pod would be placed.
	container.PlaceOnAccelerator(&spec, gpu, b.tc.Settings)
	reschedule(&spec, b.tc.Task.Interruptible, b.tc.Settings)

	labels := maps.Clone(pod.Labels)
	for k, v := range k8sPod.GetMetadata().GetLabels() {
		if !ownedLabels[k] {
			labels[k] = v
		}
	}
	annotations := withoutPrimaryAnnotation(pod.Annotations)
	for k, v := range k8sPod.GetMetadata().GetAnnotations() {
		if k != container.AnnotationPrimaryContainer && !strings.HasPrefix(k, container.AnnotationSecretPrefix) {
			annotations[k] = v
		}
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}, Spec: spec}, nil
}

// groupPod is the task's pod for a group: the base pod, or, when the group
// has extended resources of its own, the pod built again with them in place
// of the task's (an accelerator or shared memory each replaces the task's),
// and the accelerator the group's pods use.
func (b builder) groupPod(ext *core.ExtendedResources, what string) (*corev1.Pod, *task.GPUAccelerator, error) {
	t := b.tc.Task
	if ext == nil {
		return b.base.DeepCopy(), t.Extended.GPU, nil
	}
	own := *t
	if g := ext.GetGpuAccelerator(); g != nil {
		own.Extended.GPU = &task.GPUAccelerator{Device: g.GetDevice(), DeviceClass: g.GetDeviceClass().String(),
			Unpartitioned: g.GetUnpartitioned(), PartitionSize: g.GetPartitionSize()}
	}
	if m := ext.GetSharedMemory(); m != nil {
		if m.GetSizeLimit() != "" {
			if _, err := quantity.Parse(m.GetSizeLimit()); err != nil {
				return nil, nil, badSpec("%s: extended_resources.shared_memory.size_limit: %v", what, err)
			}
		}
		own.Extended.SharedMemory = &task.SharedMemory{MountPath: m.GetMountPath(), MountName: m.GetMountName(), SizeLimit: m.GetSizeLimit()}
	}
	tc := b.tc
	tc.Task = &own
	pod, err := container.BuildPod(tc)
	if err != nil {
		return nil, nil, err
	}
	return pod, own.Extended.GPU, nil
}

// headContainer makes the task's container (at idx) the Ray head's: KubeRay
// makes it run `ray start`, what the task runs goes to the job's entrypoint
// instead, and it serves Ray's ports.
func (b builder) headContainer(spec *corev1.PodSpec, idx int) {
	c := &spec.Containers[idx]
	c.Name = HeadContainerName
	b.toEntrypoint(c)
	c.Env = container.MergeEnv(c.Env, []corev1.EnvVar{fieldEnv("MY_POD_IP", "status.podIP")}, quietLogsEnv())
	c.Ports = append(c.Ports, rayPorts()...)
	if s := b.cfg.LogsSidecar; s != nil {
		addLogsSidecar(spec, idx, s)
	}
}

// workerContainer makes the task's container (at idx) a Ray worker's.
func (b builder) workerContainer(spec *corev1.PodSpec, idx int) {
	c := &spec.Containers[idx]
	c.Name = WorkerContainerName
	b.toEntrypoint(c)
	env := []corev1.EnvVar{
		{Name: "RAY_DISABLE_DOCKER_CPU_WARNING", Value: "1"},
		{Name: "TYPE", Value: "worker"},
		resourceEnv("CPU_REQUEST", "requests.cpu"),
		resourceEnv("CPU_LIMITS", "limits.cpu"),
		// Flyte's values: both memory variables read the CPU (KubeRay's API
		// server does the same); kept so that a task reads what it reads under Flyte.
		resourceEnv("MEMORY_REQUESTS", "requests.cpu"),
		resourceEnv("MEMORY_LIMITS", "limits.cpu"),
		fieldEnv("MY_POD_NAME", "metadata.name"),
		fieldEnv("MY_POD_IP", "status.podIP"),
	}
	c.Env = container.MergeEnv(c.Env, env, quietLogsEnv())
	c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "ray stop"}}}}
	c.Ports = append(c.Ports, rayPorts()...)
}

// toEntrypoint removes from a Ray container what became the job's
// entrypoint (see entrypoint).
func (b builder) toEntrypoint(c *corev1.Container) {
	c.Args = nil
	if b.tc.Task.Form == task.FormTyped {
		c.Command = nil
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func resourceEnv(name, res string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: WorkerContainerName, Resource: res}}}
}

// quietLogsEnv turns off Ray's terminal decorations (colored prefixes,
// progress bars), which make collected logs unreadable.
func quietLogsEnv() []corev1.EnvVar {
	return []corev1.EnvVar{{Name: "RAY_COLOR_PREFIX", Value: "0"}, {Name: "RAY_DATA_DISABLE_PROGRESS_BARS", Value: "1"}}
}

// rayPorts are the ports Ray's head serves (GCS, client, dashboard); Flyte
// declares them on workers too.
func rayPorts() []corev1.ContainerPort {
	return []corev1.ContainerPort{{Name: "redis", ContainerPort: 6379}, {Name: "head", ContainerPort: 10001}, {Name: "dashboard", ContainerPort: 8265}}
}

// addLogsSidecar adds the configured logs sidecar to the head pod, with
// Ray's logs directory (the head container's mount at /tmp/ray, or a new
// emptyDir there) mounted read-only.
func addLogsSidecar(spec *corev1.PodSpec, head int, sidecar *corev1.Container) {
	c := &spec.Containers[head]
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == rayStateMountPath {
			mount = c.VolumeMounts[i].DeepCopy()
			break
		}
	}
	if mount == nil {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: rayStateVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		mount = &corev1.VolumeMount{Name: rayStateVolume, MountPath: rayStateMountPath}
		c.VolumeMounts = append(c.VolumeMounts, *mount)
	}
	ro := *mount
	ro.ReadOnly = true
	s := sidecar.DeepCopy()
	replaced := false
	for i := range s.VolumeMounts {
		if s.VolumeMounts[i].MountPath == rayStateMountPath {
			s.VolumeMounts[i], replaced = ro, true
		}
	}
	if !replaced {
		s.VolumeMounts = append(s.VolumeMounts, ro)
	}
	spec.Containers = append(spec.Containers, *s)
}

// reschedule applies the interruptible placement again to a pod spec a
// group's pod spec was laid over (its node selector terms may be new):
// the (non-)interruptible requirement in every required term, and for an
// interruptible task its node selector and tolerations. Idempotent.
func reschedule(spec *corev1.PodSpec, interruptible bool, s plugin.Settings) {
	container.AddNodeSelectorRequirement(spec, interruptible, s)
	if !interruptible {
		return
	}
	if len(s.InterruptibleNodeSelector) > 0 {
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		maps.Copy(spec.NodeSelector, s.InterruptibleNodeSelector)
	}
	for _, t := range s.InterruptibleTolerations {
		present := false
		for i := range spec.Tolerations {
			present = present || t.MatchToleration(&spec.Tolerations[i])
		}
		if !present {
			spec.Tolerations = append(spec.Tolerations, *t.DeepCopy())
		}
	}
}

// ownedLabels are the labels the executor writes on every pod it makes;
// a group's pod metadata cannot replace them (as a template's cannot).
var ownedLabels = map[string]bool{
	container.LabelManaged: true, container.LabelOrganization: true, container.LabelProject: true,
	container.LabelDomain: true, container.LabelRun: true, container.LabelAction: true,
	container.LabelAttempt: true, container.LabelTaskName: true, container.LabelInjectSecrets: true,
	container.LabelFlyteProject: true, container.LabelFlyteDomain: true, container.LabelFlyteRun: true,
	container.LabelFlyteAction: true,
}

// withoutPrimaryAnnotation copies a pod's annotations without the primary
// container's: the task's container is ray-head or ray-worker in the Ray
// pods, whose outcome the RayJob's status tells.
func withoutPrimaryAnnotation(a map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	delete(out, container.AnnotationPrimaryContainer)
	return out
}

// headStartParams are the head's `ray start` parameters: the task's (even
// an empty set), else the configured defaults, completed with the dashboard,
// the node IP address and usage statistics unless set.
func headStartParams(g *plugins.HeadGroupSpec, cfg Config) map[string]string {
	params := map[string]string{}
	if p := g.GetRayStartParams(); p != nil {
		maps.Copy(params, p)
	} else {
		maps.Copy(params, cfg.Defaults.HeadNode.StartParameters)
	}
	setDefault(params, paramIncludeDashboard, strconv.FormatBool(cfg.IncludeDashboard))
	setDefault(params, paramNodeIPAddress, cfg.Defaults.HeadNode.IPAddress)
	setDefault(params, paramDashboardHost, cfg.DashboardHost)
	if !cfg.EnableUsageStats {
		setDefault(params, paramDisableUsageStats, "true")
	}
	return params
}

// workerStartParams are a worker group's `ray start` parameters.
func workerStartParams(g *plugins.WorkerGroupSpec, cfg Config) map[string]string {
	params := map[string]string{}
	if p := g.GetRayStartParams(); p != nil {
		maps.Copy(params, p)
	} else {
		maps.Copy(params, cfg.Defaults.WorkerNode.StartParameters)
	}
	setDefault(params, paramNodeIPAddress, cfg.Defaults.WorkerNode.IPAddress)
	if !cfg.EnableUsageStats {
		setDefault(params, paramDisableUsageStats, "true")
	}
	return params
}

func setDefault(m map[string]string, k, v string) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

// autoscalerOptions converts the task's autoscaler options (nil: none).
func autoscalerOptions(o *plugins.AutoscalerOptions) (*rayv1.AutoscalerOptions, error) {
	if o == nil {
		return nil, nil
	}
	out := &rayv1.AutoscalerOptions{}
	if s := o.GetIdleTimeoutSeconds(); s > 0 {
		out.IdleTimeoutSeconds = &s
	}
	modes := map[plugins.AutoscalerOptions_UpscalingMode]rayv1.UpscalingMode{
		plugins.AutoscalerOptions_UPSCALING_MODE_DEFAULT:      "Default",
		plugins.AutoscalerOptions_UPSCALING_MODE_CONSERVATIVE: "Conservative",
		plugins.AutoscalerOptions_UPSCALING_MODE_AGGRESSIVE:   "Aggressive",
	}
	if m, ok := modes[o.GetUpscalingMode()]; ok {
		out.UpscalingMode = &m
	}
	if img := o.GetImage(); img != "" {
		out.Image = &img
	}
	res := &corev1.ResourceRequirements{}
	var err error
	if o.GetResources() != nil {
		if res.Requests, err = resourceList(o.GetResources().GetRequests()); err != nil {
			return nil, badSpec("autoscaler_options.resources.requests: %v", err)
		}
		if res.Limits, err = resourceList(o.GetResources().GetLimits()); err != nil {
			return nil, badSpec("autoscaler_options.resources.limits: %v", err)
		}
	}
	out.Resources = res
	for _, kv := range o.GetEnv() {
		out.Env = append(out.Env, corev1.EnvVar{Name: kv.GetKey(), Value: kv.GetValue()})
	}
	return out, nil
}

// resourceList converts Flyte's resource entries as Flyte does for the
// autoscaler: CPU, memory, ephemeral storage and the generic "gpu"; zero
// quantities and other kinds are left out.
func resourceList(entries []*core.Resources_ResourceEntry) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, e := range entries {
		q, err := quantity.Parse(e.GetValue())
		if err != nil {
			return nil, fmt.Errorf("%s: %v", e.GetName(), err)
		}
		if n, ok := task.ResourceName(e.GetName()); ok && !q.IsZero() {
			out[n] = q
		}
	}
	return out, nil
}

// runtimeEnvYAML is the job's runtime environment: runtime_env_yaml, or the
// deprecated runtime_env (base64 of JSON) turned into YAML as Flyte turns it.
func runtimeEnvYAML(spec *plugins.RayJob) (string, error) {
	//nolint:staticcheck // the deprecated field is read for older templates, as Flyte reads it
	old := spec.GetRuntimeEnv()
	if spec.GetRuntimeEnvYaml() != "" || old == "" {
		return spec.GetRuntimeEnvYaml(), nil
	}
	raw, err := base64.StdEncoding.DecodeString(old)
	if err != nil {
		return "", badSpec("runtime_env is not base64: %v", err)
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		return "", badSpec("runtime_env is not a JSON object: %v", err)
	}
	out, err := yamlv2.Marshal(env)
	if err != nil {
		return "", badSpec("runtime_env cannot be written as YAML: %v", err)
	}
	return string(out), nil
}

// serviceAccount runs the head and workers: the task's runAs, else the
// executor's default, else plugins.ray.serviceAccount.
func serviceAccount(t *task.Task, s plugin.Settings, cfg Config) string {
	switch {
	case t.ServiceAccount != "":
		return t.ServiceAccount
	case s.DefaultServiceAccount != "":
		return s.DefaultServiceAccount
	}
	return cfg.ServiceAccount
}

// entrypoint is the Ray job's command: Flyte's runtime is started with the
// task container's arguments (its command, if any, stays the Ray
// container's, which KubeRay runs before `ray start`), joined as Flyte joins
// them; a typed task's command and arguments are both the job's.
func entrypoint(t *task.Task, pod *corev1.Pod, primary string) []string {
	for _, c := range pod.Spec.Containers {
		if c.Name == primary {
			if t.Form == task.FormTyped {
				return append(slices.Clone(c.Command), c.Args...)
			}
			return c.Args
		}
	}
	return nil
}

// submitterResources are KubeRay's defaults for its submitter, which Flyte
// writes out.
var submitterResources = corev1.ResourceRequirements{
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("200Mi")},
}

// submitterTemplate is the pod that runs `ray job submit`: the head's image
// (the Ray versions must match), KubeRay's default resources, the default
// tolerations, and the executor's labels and annotations (the task's pod
// metadata is the head's and workers', not the submitter's).
func (b builder) submitterTemplate(cluster *rayv1.RayClusterSpec) *corev1.PodTemplateSpec {
	s := b.tc.Settings
	links := false
	var tolerations []corev1.Toleration
	for _, t := range s.DefaultTolerations {
		tolerations = append(tolerations, *t.DeepCopy())
	}
	labels := map[string]string{}
	maps.Copy(labels, s.DefaultLabels)
	maps.Copy(labels, b.tc.TaskAction.Labels)
	for k, v := range b.base.Labels {
		if ownedLabels[k] {
			labels[k] = v
		}
	}
	annotations := map[string]string{}
	maps.Copy(annotations, s.DefaultAnnotations)
	for k, v := range b.tc.TaskAction.Annotations {
		if k != container.AnnotationPrimaryContainer && !strings.HasPrefix(k, container.AnnotationSecretPrefix) && k != corev1.LastAppliedConfigAnnotation {
			annotations[k] = v
		}
	}
	for k, v := range b.base.Annotations {
		if strings.HasPrefix(k, container.AnnotationSecretPrefix) {
			annotations[k] = v
		}
	}
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:      SubmitterContainerName,
				Image:     cluster.HeadGroupSpec.Template.Spec.Containers[0].Image,
				Resources: *submitterResources.DeepCopy(),
			}},
			RestartPolicy:      corev1.RestartPolicyNever,
			EnableServiceLinks: &links,
			Tolerations:        tolerations,
		},
	}
}

// check holds the head and worker pods to the executor's pod-security
// policy, as the container plugin holds task pods (the submitter, whose spec
// the task does not choose beyond the head's image, is not checked).
func (b builder) check(cluster *rayv1.RayClusterSpec) error {
	if b.policy == nil {
		return nil
	}
	ta := b.tc.TaskAction
	pods := []corev1.PodTemplateSpec{cluster.HeadGroupSpec.Template}
	for _, g := range cluster.WorkerGroupSpecs {
		pods = append(pods, g.Template)
	}
	for _, t := range pods {
		pod := &corev1.Pod{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
		pod.Namespace = ta.Namespace
		if vs := b.policy.Check(pod); len(vs) > 0 {
			return &plugin.LaunchError{Err: plugin.ExecError{Code: CodePodSecurityViolation, Kind: flytev1.ErrorKindUser,
				Message: podsecurity.Err(vs).Error()}}
		}
	}
	return nil
}
