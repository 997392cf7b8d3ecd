package container

import (
	corev1 "k8s.io/api/core/v1"
)

// TrimPod is the informer cache's transform of the pods this plugin creates:
// it keeps what the executor reads from a cached pod and drops the rest of
// the spec (environment, resources, commands, tolerations, mounts: most of a
// pod's bytes, and half of the executor's heap at 10,000 pods). Read from the
// spec: the containers' names (ObservePod, the log context), the Secret
// volumes (secretMountStuck), the hostname (log links). Metadata and status
// stay whole but for managedFields. The executor never writes a cached pod
// back: it creates pods and deletes them by UID.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	pod.ManagedFields = nil
	spec := corev1.PodSpec{Hostname: pod.Spec.Hostname, NodeName: pod.Spec.NodeName}
	for _, c := range pod.Spec.Containers {
		spec.Containers = append(spec.Containers, corev1.Container{Name: c.Name})
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Secret: v.Secret}})
		}
	}
	pod.Spec = spec
	return pod, nil
}
