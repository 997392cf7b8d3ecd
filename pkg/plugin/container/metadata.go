package container

import (
	"strconv"
	"strings"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
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

// Union is the maps merged, later ones winning; nil when all are empty.
func Union(ms ...map[string]string) map[string]string {
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
	out := Union(s.DefaultLabels, t.PodLabels, extra, ta.Labels)
	if out == nil {
		out = map[string]string{}
	}
	set := func(k, v string) {
		if v = LabelValue(v); v != "" {
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
