package secrets

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Injector is a secret manager: it changes a pod so that its containers can
// read one requested secret, without the secret's value in the pod.
type Injector interface {
	// Name identifies the manager in errors and logs.
	Name() string
	// Inject changes pod for r. It must be idempotent: injecting the same
	// request twice leaves the pod as after once.
	Inject(pod *corev1.Pod, r Request) error
}

// InjectAll injects every request into pod with inj. The first error names
// the request that could not be served.
func InjectAll(inj Injector, pod *corev1.Pod, reqs []Request) error {
	for i, r := range reqs {
		if err := inj.Inject(pod, r); err != nil {
			return fmt.Errorf("secret %d (group %q, key %q): %s: %w", i, r.Group, r.Key, inj.Name(), err)
		}
	}
	return nil
}

// EnvVarName is the variable an ENV_VAR secret is read from by Flyte's task
// runtime: prefix, group, "_", key, upper-cased ("_FSEC_GROUP_KEY").
func EnvVarName(prefix string, r Request) string {
	return strings.ToUpper(prefix + r.Group + "_" + r.Key)
}

// setEnv sets e in every container and init container, replacing a
// variable of the same name (the webhook's value wins over a user's).
func setEnv(pod *corev1.Pod, e corev1.EnvVar) {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			replaced := false
			for j := range c.Env {
				if c.Env[j].Name == e.Name {
					c.Env[j], replaced = e, true
				}
			}
			if !replaced {
				c.Env = append(c.Env, e)
			}
		}
	}
}

// addMount mounts m in every container and init container. A mount of the
// same volume at the same path is kept; another mount at that path is an
// error (the pod would be rejected, or one of them would be hidden).
func addMount(pod *corev1.Pod, m corev1.VolumeMount) error {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			present := false
			for _, old := range c.VolumeMounts {
				if old.MountPath != m.MountPath {
					continue
				}
				if old.Name != m.Name {
					return fmt.Errorf("container %s already mounts volume %s at %s", c.Name, old.Name, m.MountPath)
				}
				present = true
			}
			if !present {
				c.VolumeMounts = append(c.VolumeMounts, m)
			}
		}
	}
	return nil
}

// setAnnotation sets an annotation, refusing to change one the pod already
// has with another value.
func setAnnotation(pod *corev1.Pod, k, v string) error {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if old, ok := pod.Annotations[k]; ok && old != v {
		return fmt.Errorf("annotation %s is already set to %q", k, old)
	}
	pod.Annotations[k] = v
	return nil
}
