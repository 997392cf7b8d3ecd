package container

import (
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
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
	return MergeEnv(env, runEnv, sortedEnv(s.DefaultEnvVars))
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

// MergeEnv concatenates layers, a later definition of a name replacing an
// earlier one (as the kubelet resolves duplicates). A name keeps the position
// of its first appearance, so $(VAR) references keep working.
func MergeEnv(layers ...[]corev1.EnvVar) []corev1.EnvVar {
	n := 0
	for _, layer := range layers {
		n += len(layer)
	}
	if n == 0 {
		return nil
	}
	out := make([]corev1.EnvVar, 0, n)
	// A pod's few variables are found faster by a scan than through a map
	// (which was 4% of the executor's allocations); many use one.
	var pos map[string]int
	if n > smallEnv {
		pos = make(map[string]int, n)
	}
	for _, layer := range layers {
		for _, e := range layer {
			if e.ValueFrom != nil {
				e.ValueFrom = e.ValueFrom.DeepCopy() // the only part shared by reference
			}
			if i := envIndex(out, pos, e.Name); i >= 0 {
				out[i] = e
				continue
			}
			if pos != nil {
				pos[e.Name] = len(out)
			}
			out = append(out, e)
		}
	}
	return out
}

// smallEnv is the most variables MergeEnv scans for a name.
const smallEnv = 32

func envIndex(env []corev1.EnvVar, pos map[string]int, name string) int {
	if pos != nil {
		if i, ok := pos[name]; ok {
			return i
		}
		return -1
	}
	for i := range env {
		if env[i].Name == name {
			return i
		}
	}
	return -1
}
