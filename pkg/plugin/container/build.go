package container

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/podsecurity"
	"github.com/taskaction/executor/pkg/quantity"
	"github.com/taskaction/executor/pkg/secrets"
	"github.com/taskaction/executor/pkg/task"
)

// Labels the plugin puts on every pod, Flyte's keys. Nothing from the
// TaskAction or the template can override them.
const (
	LabelManaged       = plugin.LabelManaged
	LabelOrganization  = "organization"
	LabelProject       = "project"
	LabelDomain        = "domain"
	LabelRun           = "run"
	LabelAction        = "action"
	LabelAttempt       = "attempt"
	LabelTaskName      = "task-name"
	LabelInjectSecrets = secrets.PodLabel
	// LabelGPUPartitionSlices carries the slice count of a MIG partition (e.g. 3 for "3g.40gb").
	LabelGPUPartitionSlices = "platform.union.ai/gpu-partition-slices"

	// The labels Flyte's actions service puts on a TaskAction; the plugin sets
	// them for TaskActions written by other clients too.
	LabelFlyteProject = "flyte.org/project"
	LabelFlyteDomain  = "flyte.org/domain"
	LabelFlyteRun     = "flyte.org/run"
	LabelFlyteAction  = "flyte.org/action"

	// DefaultOrganization is the organization label Flyte's executor stamps;
	// its secret injector needs organization, project and domain.
	DefaultOrganization = "flyte"
)

const (
	// AnnotationPrimaryContainer names the task's container, so that the pod
	// alone says which container decides the outcome (ObservePod is pure).
	AnnotationPrimaryContainer = task.PrimaryContainerConfigKey
	// AnnotationSecretPrefix + index carries the index-th secret of the task
	// in Flyte's encoding, which the secret webhook reads (pkg/secrets).
	AnnotationSecretPrefix = secrets.AnnotationPrefix
	// DefaultPrimaryContainerName is the typed form's task container name
	// unless its pod template names another.
	DefaultPrimaryContainerName = task.DefaultTypedPrimaryContainerName

	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
)

// Environment variables the plugin sets, Flyte's names.
const (
	EnvActionName       = "ACTION_NAME"
	EnvRunName          = "RUN_NAME"
	EnvRunBase          = "_U_RUN_BASE"
	EnvOrgName          = "_U_ORG_NAME"
	EnvPodName          = "_F_PN"
	EnvAttemptNumber    = "FLYTE_ATTEMPT_NUMBER"
	EnvExecutionID      = "FLYTE_INTERNAL_EXECUTION_ID"
	EnvExecutionProject = "FLYTE_INTERNAL_EXECUTION_PROJECT"
	EnvExecutionDomain  = "FLYTE_INTERNAL_EXECUTION_DOMAIN"

	// DefaultOrgName is the value of _U_ORG_NAME (the runtime asserts one).
	DefaultOrgName = "local"
)

// CodeBadTaskSpecification is the error code of a task that cannot be turned into a pod.
const CodeBadTaskSpecification = "BadTaskSpecification"

// CodePodSecurityViolation is the error code of a task whose pod the
// executor's pod-security policy refuses (a permanent user failure).
const CodePodSecurityViolation = "PodSecurityViolation"

// badSpec is the permanent user failure of a task that cannot become a pod.
func badSpec(format string, a ...any) error {
	return &plugin.LaunchError{
		Err: plugin.ExecError{
			Code:    CodeBadTaskSpecification,
			Kind:    flytev1.ErrorKindUser,
			Message: fmt.Sprintf(format, a...),
		},
		Retryable: false,
	}
}

// BuildPod is the pod of attempt tc.Attempt (1-based) of tc.TaskAction, built
// from the decoded task tc.Task by the rules of Flyte's pod plugin (the
// differences are listed in docs/flyte-compat.md). It modifies neither. A
// task that cannot become a pod gives a *plugin.LaunchError
// (BadTaskSpecification, permanent); invalid executor settings give a plain error.
func BuildPod(tc plugin.TaskContext) (*corev1.Pod, error) {
	ta := tc.TaskAction
	if ta == nil {
		return nil, fmt.Errorf("no TaskAction in the task context")
	}
	t := tc.Task
	if t == nil {
		var err error
		if t, err = task.FromTaskAction(ta); err != nil {
			return nil, badSpec("%v", err)
		}
	}
	attempt := max(tc.Attempt, 1)
	podName := PodName(ta.Name, attempt)
	primary := t.PrimaryContainerName
	if primary == "" {
		primary = podName
	}
	if errs := validation.IsDNS1123Label(primary); len(errs) > 0 {
		return nil, badSpec("primary container name %q is not a valid container name: %s", primary, strings.Join(errs, "; "))
	}

	var spec corev1.PodSpec
	if t.PodSpec != nil {
		spec = *t.PodSpec.DeepCopy()
	}
	idx := containerIndex(spec.Containers, primary)
	if t.Container != nil {
		var base corev1.Container
		if idx >= 0 {
			base = spec.Containers[idx]
		}
		c := mergePrimary(base, t.Container)
		c.Name = primary
		if idx >= 0 {
			spec.Containers[idx] = c
		} else {
			spec.Containers = append([]corev1.Container{c}, spec.Containers...)
			idx = 0
		}
	} else if idx < 0 {
		return nil, badSpec("the primary container %q is not in the pod spec", primary)
	}
	if spec.Containers[idx].Image == "" {
		return nil, badSpec("the task container %q has no image", primary)
	}

	vars := varsFor(ta, attempt, podName)
	vars.inputs = task.NewInputRenderer(tc.Inputs)
	env := taskEnv(ta, t, attempt, tc.Settings)
	accel := acceleratorFor(t.Extended.GPU, tc.Settings)
	if err := decorate(spec.InitContainers, "initContainers", vars, env, accel); err != nil {
		return nil, err
	}
	if err := decorate(spec.Containers, "containers", vars, env, accel); err != nil {
		return nil, err
	}
	p := &spec.Containers[idx]
	var err error
	if p.Resources, err = defaultResources(p.Resources, tc.Settings); err != nil {
		return nil, err
	}
	if p.TerminationMessagePolicy == "" {
		// The kubelet then reports the log tail when the task wrote no termination message.
		p.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	}

	// Never unless the template asks otherwise: a restarted container would
	// hide the attempt's outcome. (An invalid value is left for the API server to reject.)
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyNever
	}
	if spec.EnableServiceLinks == nil {
		// Service env vars of a busy namespace can overflow the environment.
		f := false
		spec.EnableServiceLinks = &f
	}
	// The deprecated alias serviceAccount is the pod spec's account when
	// serviceAccountName is empty (the API server reads it so); it is cleared,
	// so that the account the policy checks is the one the pod runs as.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = ""
	spec.ServiceAccountName = serviceAccount(t, spec.ServiceAccountName, tc.Settings)
	schedule(&spec, t.Interruptible, tc.Settings)

	podLabels := map[string]string{}
	if err := applyExtendedResources(&spec, idx, t.Extended, accel, tc.Settings, podLabels); err != nil {
		return nil, err
	}
	annotations, err := podAnnotations(ta, t, primary, tc.Settings)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            podName,
			Namespace:       ta.Namespace,
			Labels:          labelsFor(ta, t, attempt, tc.Settings, podLabels),
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{plugin.ControllerRef(ta)},
		},
		Spec: spec,
	}
	if pol := tc.Settings.PodSecurity; pol != nil {
		if vs := pol.Check(pod); len(vs) > 0 {
			return nil, &plugin.LaunchError{Err: plugin.ExecError{Code: CodePodSecurityViolation, Kind: flytev1.ErrorKindUser,
				Message: podsecurity.Err(vs).Error()}}
		}
	}
	return pod, nil
}

func containerIndex(cs []corev1.Container, name string) int {
	for i := range cs {
		if cs[i].Name == name {
			return i
		}
	}
	return -1
}

// mergePrimary lays the task's container over the pod spec's container of
// the same name: the task's image, command, args and resources win where
// set, its env comes after the pod spec's; volume mounts and everything else
// come from the pod spec.
func mergePrimary(base corev1.Container, tc *task.Container) corev1.Container {
	c := *base.DeepCopy()
	if tc.Image != "" {
		c.Image = tc.Image
	}
	if len(tc.Command) > 0 {
		c.Command = append([]string(nil), tc.Command...)
	}
	if len(tc.Args) > 0 {
		c.Args = append([]string(nil), tc.Args...)
	}
	c.Env = mergeEnv(base.Env, tc.Env)
	c.Resources.Requests = mergeResourceList(base.Resources.Requests, tc.Resources.Requests)
	c.Resources.Limits = mergeResourceList(base.Resources.Limits, tc.Resources.Limits)
	if len(tc.Resources.Claims) > 0 {
		c.Resources.Claims = tc.Resources.Claims
	}
	return c
}

func mergeResourceList(base, over corev1.ResourceList) corev1.ResourceList {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for k, v := range base {
		out[k] = v.DeepCopy()
	}
	for k, v := range over {
		out[k] = v.DeepCopy()
	}
	return out
}

// decorate renders the placeholders of every container's command and args,
// adds the task's environment, and names generic GPUs as the accelerator's
// resource, as Flyte does for every container of the pod.
func decorate(cs []corev1.Container, field string, vars templateVars, env []corev1.EnvVar, accel accelerator) error {
	for i := range cs {
		c := &cs[i]
		where := fmt.Sprintf("%s[%s]", field, c.Name)
		var err error
		if c.Command, err = vars.render(where+".command", c.Command); err != nil {
			return badSpec("%v", err)
		}
		if c.Args, err = vars.render(where+".args", c.Args); err != nil {
			return badSpec("%v", err)
		}
		c.Env = mergeEnv(c.Env, env)
		renameGPU(c.Resources.Requests, accel.resourceName)
		renameGPU(c.Resources.Limits, accel.resourceName)
	}
	return nil
}

// taskEnv is what Flyte's executor adds to every container, in its order of
// precedence (later wins): the execution identity, the task identity, the
// run's variables (which cannot replace ACTION_NAME, RUN_NAME, _U_RUN_BASE
// and _U_ORG_NAME), then the configured defaults. The attempt number is
// 0-based (the retry number).
func taskEnv(ta *flytev1.TaskAction, t *task.Task, attempt int32, s plugin.Settings) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: EnvExecutionID, Value: ta.Spec.RunName},
		{Name: EnvExecutionProject, Value: ta.Spec.Project},
		{Name: EnvExecutionDomain, Value: ta.Spec.Domain},
		{Name: EnvPodName, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: EnvAttemptNumber, Value: strconv.Itoa(int(attempt - 1))},
	}
	if t.ID != (task.Identifier{}) {
		id := t.ID
		env = append(env,
			corev1.EnvVar{Name: "FLYTE_INTERNAL_TASK_PROJECT", Value: id.Project},
			corev1.EnvVar{Name: "FLYTE_INTERNAL_TASK_DOMAIN", Value: id.Domain},
			corev1.EnvVar{Name: "FLYTE_INTERNAL_TASK_NAME", Value: id.Name},
			corev1.EnvVar{Name: "FLYTE_INTERNAL_TASK_VERSION", Value: id.Version},
			corev1.EnvVar{Name: "FLYTE_INTERNAL_PROJECT", Value: id.Project},
			corev1.EnvVar{Name: "FLYTE_INTERNAL_DOMAIN", Value: id.Domain},
			corev1.EnvVar{Name: "FLYTE_INTERNAL_NAME", Value: id.Name},
			corev1.EnvVar{Name: "FLYTE_INTERNAL_VERSION", Value: id.Version},
		)
	}
	runEnv := []corev1.EnvVar{
		{Name: EnvActionName, Value: ta.Spec.ActionName},
		{Name: EnvRunName, Value: ta.Spec.RunName},
		{Name: EnvRunBase, Value: ta.Spec.RunOutputBase},
		{Name: EnvOrgName, Value: DefaultOrgName},
	}
	protected := map[string]bool{}
	for _, e := range runEnv {
		protected[e.Name] = true
	}
	for _, e := range sortedEnv(ta.Spec.EnvVars) {
		if !protected[e.Name] {
			runEnv = append(runEnv, e)
		}
	}
	return mergeEnv(env, runEnv, sortedEnv(s.DefaultEnvVars))
}

func sortedEnv(m map[string]string) []corev1.EnvVar {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]corev1.EnvVar, 0, len(keys))
	for _, k := range keys {
		out = append(out, corev1.EnvVar{Name: k, Value: m[k]})
	}
	return out
}

// mergeEnv concatenates layers, a later definition of a name replacing an
// earlier one (as the kubelet resolves duplicates). A name keeps the position
// of its first appearance, so $(VAR) references keep working.
func mergeEnv(layers ...[]corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	pos := map[string]int{}
	for _, layer := range layers {
		for _, e := range layer {
			e = *e.DeepCopy()
			if i, ok := pos[e.Name]; ok {
				out[i] = e
				continue
			}
			pos[e.Name] = len(out)
			out = append(out, e)
		}
	}
	return out
}

// defaultResources completes the primary container's resources by Flyte's
// rules: CPU and memory always (a missing request copies the limit, else the
// executor default; a missing limit copies the request), ephemeral storage
// and accelerators only when asked for; a request above its limit is lowered
// to the limit.
func defaultResources(r corev1.ResourceRequirements, s plugin.Settings) (corev1.ResourceRequirements, error) {
	out := *r.DeepCopy()
	if out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	if out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	for _, d := range []struct {
		name corev1.ResourceName
		def  string
	}{{corev1.ResourceCPU, s.DefaultCPU}, {corev1.ResourceMemory, s.DefaultMemory}} {
		var def resource.Quantity
		if d.def != "" {
			q, err := quantity.Parse(d.def)
			if err != nil {
				return out, fmt.Errorf("executor default %s %q: %w", d.name, d.def, err)
			}
			def = q
		}
		adjust(out, d.name, def)
	}
	extra := []corev1.ResourceName{corev1.ResourceEphemeralStorage}
	extra = append(extra, acceleratorResourceNames(s)...)
	for _, name := range extra {
		_, req := out.Requests[name]
		_, lim := out.Limits[name]
		if req || lim {
			adjust(out, name, resource.Quantity{})
		}
	}
	if len(out.Requests) == 0 {
		out.Requests = nil
	}
	if len(out.Limits) == 0 {
		out.Limits = nil
	}
	return out, nil
}

// adjust sets request and limit of name: an unset (or zero) request takes the
// limit, else def; an unset limit takes the request; the request is at most
// the limit. Nothing at all stays unset.
func adjust(r corev1.ResourceRequirements, name corev1.ResourceName, def resource.Quantity) {
	req, lim := r.Requests[name], r.Limits[name]
	if req.IsZero() {
		if !lim.IsZero() {
			req = lim.DeepCopy()
		} else {
			req = def.DeepCopy()
		}
	}
	if lim.IsZero() {
		lim = req.DeepCopy()
	}
	if !lim.IsZero() && req.Cmp(lim) > 0 {
		req = lim.DeepCopy()
	}
	if req.IsZero() && lim.IsZero() {
		delete(r.Requests, name)
		delete(r.Limits, name)
		return
	}
	r.Requests[name] = req
	r.Limits[name] = lim
}

// ValidateSettings checks the settings BuildPod parses, for use at startup.
func ValidateSettings(s plugin.Settings) error {
	for name, v := range map[string]string{"default CPU": s.DefaultCPU, "default memory": s.DefaultMemory} {
		if v == "" {
			continue
		}
		if _, err := quantity.Parse(v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	for k := range s.DefaultEnvVars {
		if k == "" {
			return fmt.Errorf("default environment variables: empty name")
		}
	}
	return nil
}

// serviceAccount resolves the pod's service account: the task's runAs, else
// the pod spec's, else the executor default, else empty (the namespace's
// default service account).
func serviceAccount(t *task.Task, fromSpec string, s plugin.Settings) string {
	if t.ServiceAccount != "" {
		return t.ServiceAccount
	}
	if fromSpec != "" {
		return fromSpec
	}
	return s.DefaultServiceAccount
}

// schedule applies the configured placement: default and interruptible
// tolerations go before the pod spec's own, node selectors are merged (the
// pod spec's win over the default, the interruptible one over both), and the
// (non-)interruptible node selector requirement joins the required node
// affinity.
func schedule(spec *corev1.PodSpec, interruptible bool, s plugin.Settings) {
	var tols []corev1.Toleration
	if interruptible {
		tols = append(tols, s.InterruptibleTolerations...)
	}
	tols = append(tols, s.DefaultTolerations...)
	if len(tols) > 0 {
		spec.Tolerations = append(deepCopyTolerations(tols), spec.Tolerations...)
	}
	spec.NodeSelector = union(s.DefaultNodeSelector, spec.NodeSelector)
	if interruptible {
		spec.NodeSelector = union(spec.NodeSelector, s.InterruptibleNodeSelector)
	}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	req := s.NonInterruptibleNodeSelectorRequirement
	if interruptible {
		req = s.InterruptibleNodeSelectorRequirement
	}
	if req != nil {
		addRequiredNodeSelectorRequirement(spec.Affinity, *req.DeepCopy())
	}
}

func deepCopyTolerations(in []corev1.Toleration) []corev1.Toleration {
	out := make([]corev1.Toleration, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// addRequiredNodeSelectorRequirement adds req to every required node selector
// term that lacks it, or makes it the only term.
func addRequiredNodeSelectorRequirement(a *corev1.Affinity, req corev1.NodeSelectorRequirement) {
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := a.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}}
		return
	}
	for i := range terms {
		if !hasRequirement(terms[i].MatchExpressions, req) {
			terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
		}
	}
}

func hasRequirement(reqs []corev1.NodeSelectorRequirement, r corev1.NodeSelectorRequirement) bool {
	for _, x := range reqs {
		if x.Key == r.Key && x.Operator == r.Operator && strings.Join(x.Values, "\x00") == strings.Join(r.Values, "\x00") {
			return true
		}
	}
	return false
}

// union is the maps merged, later ones winning; nil when all are empty.
func union(ms ...map[string]string) map[string]string {
	var out map[string]string
	for _, m := range ms {
		for k, v := range m {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// labelsFor: the configured default labels, then the template's pod labels
// (and extra, the plugin's own such as the GPU partition), then the
// TaskAction's labels, then the labels the executor owns (Flyte's
// execution identity, the managed label), which nothing can override.
func labelsFor(ta *flytev1.TaskAction, t *task.Task, attempt int32, s plugin.Settings, extra map[string]string) map[string]string {
	out := union(s.DefaultLabels, t.PodLabels, extra, ta.Labels)
	if out == nil {
		out = map[string]string{}
	}
	set := func(k, v string) {
		if v = labelValue(v); v != "" {
			out[k] = v
		} else {
			delete(out, k)
		}
	}
	out[LabelOrganization] = DefaultOrganization
	set(LabelProject, ta.Spec.Project)
	set(LabelDomain, ta.Spec.Domain)
	set(LabelFlyteProject, ta.Spec.Project)
	set(LabelFlyteDomain, ta.Spec.Domain)
	set(LabelFlyteRun, ta.Spec.RunName)
	set(LabelFlyteAction, ta.Spec.ActionName)
	set(LabelRun, ta.Spec.RunName)
	set(LabelAction, ta.Spec.ActionName)
	out[LabelAttempt] = strconv.Itoa(int(attempt))
	set(LabelTaskName, t.ID.Name)
	if len(t.Secrets) > 0 {
		out[LabelInjectSecrets] = secrets.PodLabelValue
	} else {
		delete(out, LabelInjectSecrets)
	}
	out[LabelManaged] = "true"
	return out
}

// podAnnotations: the configured defaults, then the template's pod
// annotations, then the TaskAction's, then the primary container and the
// secret requests. Secret requests come only from the task's template, and
// kubectl's last-applied copy is not carried over (it can be large and
// describes the TaskAction, not the pod).
func podAnnotations(ta *flytev1.TaskAction, t *task.Task, primary string, s plugin.Settings) (map[string]string, error) {
	out := map[string]string{}
	for _, m := range []map[string]string{s.DefaultAnnotations, t.PodAnnotations, ta.Annotations} {
		for k, v := range m {
			if k == lastAppliedAnnotation || k == AnnotationPrimaryContainer || strings.HasPrefix(k, AnnotationSecretPrefix) {
				continue
			}
			out[k] = v
		}
	}
	reqs, err := secretRequests(t.Secrets)
	if err != nil {
		return nil, err
	}
	for k, v := range secrets.Annotations(reqs) {
		out[k] = v
	}
	// Flyte leaves the annotation off raw-container pods, whose outcome is
	// that of all their containers.
	if t.Type != task.TypeRawContainer {
		out[AnnotationPrimaryContainer] = primary
	}
	return out, nil
}

// secretRequests are the task's secrets as the secret webhook reads them.
func secretRequests(ss []task.Secret) ([]secrets.Request, error) {
	mounts := map[task.MountRequirement]secrets.MountType{
		"": secrets.MountAny, task.MountAny: secrets.MountAny, task.MountEnvVar: secrets.MountEnvVar, task.MountFile: secrets.MountFile,
	}
	out := make([]secrets.Request, 0, len(ss))
	for i, s := range ss {
		m, ok := mounts[s.Mount]
		if !ok {
			return nil, badSpec("secret %d: unknown mount requirement %q", i, s.Mount)
		}
		out = append(out, secrets.Request{Group: s.Group, GroupVersion: s.GroupVersion, Key: s.Key, Mount: m, EnvVar: s.EnvVar})
	}
	return out, nil
}
