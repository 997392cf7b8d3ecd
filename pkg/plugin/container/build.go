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
	"github.com/taskaction/executor/pkg/webhook/secrets"
)

// Labels the plugin puts on every pod. TaskAction and pod-template labels
// cannot set them: the pod cache and the garbage collector trust them.
const (
	LabelManaged  = "flyte.org/managed"
	LabelProject  = "flyte.org/project"
	LabelDomain   = "flyte.org/domain"
	LabelRun      = "flyte.org/run"
	LabelAction   = "flyte.org/action"
	LabelAttempt  = "flyte.org/attempt"
	LabelTaskName = "flyte.org/task-name"
)

var reservedLabels = []string{LabelManaged, LabelProject, LabelDomain, LabelRun, LabelAction, LabelAttempt, LabelTaskName, secrets.PodLabel}

const (
	// AnnotationPrimaryContainer names the task's container, so that the pod
	// alone says which container decides the outcome (ObservePod is pure).
	AnnotationPrimaryContainer = "flyte.org/primary-container"
	// AnnotationSecretPrefix + index describes the index-th secret of the
	// task in Flyte's format, which the secret webhook reads (pkg/webhook/secrets).
	AnnotationSecretPrefix = secrets.AnnotationPrefix
	// DefaultPrimaryContainerName is the task container's name unless the pod
	// template names another.
	DefaultPrimaryContainerName = "task"

	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
)

// Environment variables set by the executor; nothing else may override them.
const (
	EnvActionName       = "ACTION_NAME"
	EnvRunName          = "RUN_NAME"
	EnvAttemptNumber    = "FLYTE_ATTEMPT_NUMBER"
	EnvExecutionID      = "FLYTE_INTERNAL_EXECUTION_ID"
	EnvExecutionProject = "FLYTE_INTERNAL_EXECUTION_PROJECT"
	EnvExecutionDomain  = "FLYTE_INTERNAL_EXECUTION_DOMAIN"
)

// CodeBadTaskSpecification is the error code of a task that cannot be turned into a pod.
const CodeBadTaskSpecification = "BadTaskSpecification"

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

// BuildPod is the pod of attempt tc.Attempt (1-based) of tc.TaskAction. It
// does not modify the TaskAction. A task that cannot become a pod gives a
// *plugin.LaunchError (BadTaskSpecification, permanent); invalid executor
// settings give a plain error.
func BuildPod(tc plugin.TaskContext) (*corev1.Pod, error) {
	ta := tc.TaskAction
	if ta == nil {
		return nil, fmt.Errorf("no TaskAction in the task context")
	}
	attempt := max(tc.Attempt, 1)
	tt := ta.Spec.TaskTemplate
	if tt == nil || tt.Container == nil {
		return nil, badSpec("the task template has no container")
	}
	pt := tt.PodTemplate
	if pt == nil {
		pt = &flytev1.PodTemplate{}
	}
	primaryName := pt.PrimaryContainerName
	if primaryName == "" {
		primaryName = DefaultPrimaryContainerName
	}
	if errs := validation.IsDNS1123Label(primaryName); len(errs) > 0 {
		return nil, badSpec("podTemplate.primaryContainerName %q is not a valid container name: %s", primaryName, strings.Join(errs, "; "))
	}

	// The pod template's spec is the base; the generated parts go on top.
	var spec corev1.PodSpec
	if pt.Spec != nil {
		spec = *pt.Spec.DeepCopy()
	}
	idx := -1
	for i := range spec.Containers {
		if spec.Containers[i].Name == primaryName {
			idx = i
			break
		}
	}
	var base corev1.Container
	if idx >= 0 {
		base = spec.Containers[idx]
	}
	c := mergePrimary(base, tt.Container.DeepCopy())
	c.Name = primaryName
	if c.Image == "" {
		return nil, badSpec("the task container has no image")
	}

	vars := varsFor(ta, attempt)
	var err error
	if c.Command, err = vars.render("command", c.Command); err != nil {
		return nil, badSpec("%v", err)
	}
	if c.Args, err = vars.render("args", c.Args); err != nil {
		return nil, badSpec("%v", err)
	}
	c.Env = mergeEnv(builtinEnv(ta, attempt), base.Env, tt.Container.Env, sortedEnv(ta.Spec.EnvVars))
	if c.Resources, err = defaultResources(c.Resources, tc.Settings); err != nil {
		return nil, err
	}
	// The kubelet then reports the log tail when the task wrote no termination message.
	c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError

	if idx >= 0 {
		spec.Containers[idx] = c
	} else {
		spec.Containers = append([]corev1.Container{c}, spec.Containers...)
	}
	// Never unless the pod template asks otherwise: a restarted container
	// would hide the attempt's outcome. (An invalid value is left for the
	// API server to reject.)
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyNever
	}
	if spec.EnableServiceLinks == nil {
		// Service env vars of a busy namespace can overflow the environment.
		f := false
		spec.EnableServiceLinks = &f
	}
	spec.ServiceAccountName = serviceAccount(tt, spec.ServiceAccountName, tc.Settings)

	t := true
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        PodName(ta.Name, attempt),
			Namespace:   ta.Namespace,
			Labels:      podLabels(ta, pt, attempt),
			Annotations: podAnnotations(ta, pt, primaryName),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         flytev1.GroupVersion.String(),
				Kind:               "TaskAction",
				Name:               ta.Name,
				UID:                ta.UID,
				Controller:         &t,
				BlockOwnerDeletion: &t,
			}},
		},
		Spec: spec,
	}
	return pod, nil
}

// mergePrimary lays the task's container over the pod template's container
// of the same name: the task's image, command, args and resources win where
// set. Env is merged separately (mergeEnv); volume mounts and everything else
// come from the template.
func mergePrimary(base corev1.Container, task *flytev1.Container) corev1.Container {
	c := base
	if task.Image != "" {
		c.Image = task.Image
	}
	if len(task.Command) > 0 {
		c.Command = task.Command
	}
	if len(task.Args) > 0 {
		c.Args = task.Args
	}
	c.Resources.Requests = mergeResourceList(base.Resources.Requests, task.Resources.Requests)
	c.Resources.Limits = mergeResourceList(base.Resources.Limits, task.Resources.Limits)
	if len(task.Resources.Claims) > 0 {
		c.Resources.Claims = task.Resources.Claims
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

// builtinEnv are the variables the executor sets for every task. The attempt
// number is 0-based (the retry number), as in Flyte.
func builtinEnv(ta *flytev1.TaskAction, attempt int32) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: EnvActionName, Value: ta.Spec.ActionName},
		{Name: EnvRunName, Value: ta.Spec.RunName},
		{Name: EnvAttemptNumber, Value: strconv.Itoa(int(attempt - 1))},
		{Name: EnvExecutionID, Value: ta.Spec.RunName},
		{Name: EnvExecutionProject, Value: ta.Spec.Project},
		{Name: EnvExecutionDomain, Value: ta.Spec.Domain},
	}
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

// mergeEnv is builtins followed by layers, later layers overriding earlier
// ones. A name keeps the position of its first appearance (so $(VAR)
// references keep working) and takes its last value; builtin names are never
// overridden. The order is deterministic.
func mergeEnv(builtins []corev1.EnvVar, layers ...[]corev1.EnvVar) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(builtins))
	reserved := map[string]bool{}
	pos := map[string]int{}
	for _, e := range builtins {
		reserved[e.Name] = true
		out = append(out, e)
	}
	for _, layer := range layers {
		for _, e := range layer {
			if reserved[e.Name] {
				continue
			}
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

// defaultResources fills the CPU and memory of the task container: with
// neither request nor limit, both get the executor default (if configured);
// a missing request copies the limit and a missing limit copies the request.
// A request above its limit is a task error (the API server would refuse it).
func defaultResources(r corev1.ResourceRequirements, s plugin.Settings) (corev1.ResourceRequirements, error) {
	out := *r.DeepCopy()
	for _, d := range []struct {
		name corev1.ResourceName
		def  string
	}{{corev1.ResourceCPU, s.DefaultCPU}, {corev1.ResourceMemory, s.DefaultMemory}} {
		req, hasReq := out.Requests[d.name]
		lim, hasLim := out.Limits[d.name]
		switch {
		case !hasReq && !hasLim:
			if d.def == "" {
				continue
			}
			q, err := resource.ParseQuantity(d.def)
			if err != nil {
				return out, fmt.Errorf("executor default %s %q: %w", d.name, d.def, err)
			}
			req, lim = q, q.DeepCopy()
		case !hasReq:
			req = lim.DeepCopy()
		case !hasLim:
			lim = req.DeepCopy()
		case req.Cmp(lim) > 0:
			return out, badSpec("the %s request %s is above its limit %s", d.name, req.String(), lim.String())
		}
		if out.Requests == nil {
			out.Requests = corev1.ResourceList{}
		}
		if out.Limits == nil {
			out.Limits = corev1.ResourceList{}
		}
		out.Requests[d.name] = req
		out.Limits[d.name] = lim
	}
	return out, nil
}

// ValidateSettings checks the settings BuildPod parses, for use at startup.
func ValidateSettings(s plugin.Settings) error {
	for name, v := range map[string]string{"default CPU": s.DefaultCPU, "default memory": s.DefaultMemory} {
		if v == "" {
			continue
		}
		if _, err := resource.ParseQuantity(v); err != nil {
			return fmt.Errorf("%s %q: %w", name, v, err)
		}
	}
	return nil
}

// serviceAccount resolves the pod's service account: the task's runAs, else
// the pod template's, else the executor default, else empty (the namespace's
// default service account).
func serviceAccount(tt *flytev1.TaskTemplate, fromTemplate string, s plugin.Settings) string {
	if sc := tt.SecurityContext; sc != nil && sc.RunAs != nil && sc.RunAs.K8sServiceAccount != "" {
		return sc.RunAs.K8sServiceAccount
	}
	if fromTemplate != "" {
		return fromTemplate
	}
	return s.DefaultServiceAccount
}

// podLabels: the TaskAction's labels, then the pod template's, then the
// injected ones. Reserved keys are dropped from the first two even when the
// injected value is empty (omitted), so they cannot be spoofed.
func podLabels(ta *flytev1.TaskAction, pt *flytev1.PodTemplate, attempt int32) map[string]string {
	out := map[string]string{}
	for _, m := range []map[string]string{ta.Labels, pt.Labels} {
		for k, v := range m {
			out[k] = v
		}
	}
	for _, k := range reservedLabels {
		delete(out, k)
	}
	taskName := ""
	if ta.Spec.TaskTemplate != nil {
		taskName = ta.Spec.TaskTemplate.ID.Name
	}
	for k, v := range map[string]string{
		LabelProject:  ta.Spec.Project,
		LabelDomain:   ta.Spec.Domain,
		LabelRun:      ta.Spec.RunName,
		LabelAction:   ta.Spec.ActionName,
		LabelAttempt:  strconv.Itoa(int(attempt)),
		LabelTaskName: taskName,
	} {
		if v = labelValue(v); v != "" {
			out[k] = v
		}
	}
	out[LabelManaged] = "true"
	if len(secretRequests(ta)) > 0 {
		// Selects the pod for the secret webhook, which fails closed.
		out[secrets.PodLabel] = secrets.PodLabelValue
	}
	return out
}

// secretRequests are the task's secrets as the webhook reads them.
func secretRequests(ta *flytev1.TaskAction) []secrets.Request {
	if ta.Spec.TaskTemplate == nil || ta.Spec.TaskTemplate.SecurityContext == nil {
		return nil
	}
	sc := ta.Spec.TaskTemplate.SecurityContext
	mounts := map[flytev1.MountRequirement]secrets.MountType{"": secrets.MountAny, flytev1.MountEnvVar: secrets.MountEnvVar, flytev1.MountFile: secrets.MountFile}
	out := make([]secrets.Request, 0, len(sc.Secrets))
	for _, s := range sc.Secrets {
		out = append(out, secrets.Request{Group: s.Group, Key: s.Key, Mount: mounts[s.MountRequirement]})
	}
	return out
}

// podAnnotations: the TaskAction's annotations, then the pod template's,
// then the injected ones (secrets, primary container). Injected keys cannot
// come from the first two, and kubectl's last-applied copy is not carried
// over (it can be large and describes the TaskAction, not the pod).
func podAnnotations(ta *flytev1.TaskAction, pt *flytev1.PodTemplate, primary string) map[string]string {
	out := map[string]string{}
	for _, m := range []map[string]string{ta.Annotations, pt.Annotations} {
		for k, v := range m {
			if k == lastAppliedAnnotation || k == AnnotationPrimaryContainer || strings.HasPrefix(k, AnnotationSecretPrefix) {
				continue
			}
			out[k] = v
		}
	}
	for k, v := range secrets.Annotations(secretRequests(ta)) {
		out[k] = v
	}
	out[AnnotationPrimaryContainer] = primary
	return out
}
