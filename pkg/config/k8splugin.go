package config

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// K8sPluginSection is where a Flyte configuration file keeps the defaults of
// the pods its plugins build: `plugins: k8s:`. The executor reads the keys it
// implements with Flyte's spelling, so one file configures both; the others
// are ignored.
const K8sPluginSection = "plugins.k8s"

// K8sPluginConfig holds pod defaults from `plugins: k8s:`.
type K8sPluginConfig struct {
	DefaultEnvVars      map[string]string   `json:"default-env-vars,omitempty"`
	DefaultLabels       map[string]string   `json:"default-labels,omitempty"`
	DefaultAnnotations  map[string]string   `json:"default-annotations,omitempty"`
	DefaultNodeSelector map[string]string   `json:"default-node-selector,omitempty"`
	DefaultTolerations  []corev1.Toleration `json:"default-tolerations,omitempty"`

	InterruptibleTolerations                []corev1.Toleration             `json:"interruptible-tolerations,omitempty"`
	InterruptibleNodeSelector               map[string]string               `json:"interruptible-node-selector,omitempty"`
	InterruptibleNodeSelectorRequirement    *corev1.NodeSelectorRequirement `json:"interruptible-node-selector-requirement,omitempty"`
	NonInterruptibleNodeSelectorRequirement *corev1.NodeSelectorRequirement `json:"non-interruptible-node-selector-requirement,omitempty"`

	GPUResourceName corev1.ResourceName `json:"gpu-resource-name,omitempty"`
}

// DefaultK8sPluginConfig is Flyte's default of the keys the executor reads
// from `plugins: k8s:` (flytek8s config): pods may not be evicted by the
// cluster autoscaler, a generic GPU is an NVIDIA GPU.
func DefaultK8sPluginConfig() K8sPluginConfig {
	return K8sPluginConfig{
		DefaultAnnotations: map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
		GPUResourceName:    "nvidia.com/gpu",
	}
}

// TaskPluginsSection is Flyte's `tasks: task-plugins:`; the executor reads its
// default-for-task-types map (task type → plugin ID).
const TaskPluginsSection = "tasks.task-plugins"

// Validate checks names that would make every pod invalid.
func (c K8sPluginConfig) Validate() error {
	keys := make([]string, 0, len(c.DefaultEnvVars))
	for k := range c.DefaultEnvVars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if errs := validation.IsEnvVarName(k); len(errs) > 0 {
			return fmt.Errorf("%s.default-env-vars %q: not an environment variable name", K8sPluginSection, k)
		}
	}
	for what, m := range map[string]map[string]string{"default-labels": c.DefaultLabels, "interruptible-node-selector": c.InterruptibleNodeSelector, "default-node-selector": c.DefaultNodeSelector} {
		for k, v := range m {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return fmt.Errorf("%s.%s %q: not a label key", K8sPluginSection, what, k)
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				return fmt.Errorf("%s.%s %q: %q is not a label value", K8sPluginSection, what, k, v)
			}
		}
	}
	return nil
}
