package container

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/podsecurity"
	"github.com/taskaction/executor/pkg/quantity"
	"github.com/taskaction/executor/pkg/task"
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
	c.Env = MergeEnv(base.Env, tc.Env)
	c.Resources.Requests = MergeResourceList(base.Resources.Requests, tc.Resources.Requests)
	c.Resources.Limits = MergeResourceList(base.Resources.Limits, tc.Resources.Limits)
	if len(tc.Resources.Claims) > 0 {
		c.Resources.Claims = tc.Resources.Claims
	}
	return c
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
		c.Env = MergeEnv(c.Env, env)
		renameGPU(c.Resources.Requests, accel.resourceName)
		renameGPU(c.Resources.Limits, accel.resourceName)
	}
	return nil
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
