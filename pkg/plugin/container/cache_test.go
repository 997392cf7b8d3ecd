package container

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskaction/executor/pkg/plugin"
)

// sameFromCache fails when the pod as the informer cache keeps it (TrimPod)
// is observed differently from the pod itself.
func sameFromCache(t *testing.T, pod *corev1.Pod, want plugin.Observation, observe func(*corev1.Pod) plugin.Observation) {
	t.Helper()
	trimmed, err := TrimPod(pod.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if got := observe(trimmed.(*corev1.Pod)); !reflect.DeepEqual(got, want) {
		t.Errorf("observed from the cache's trimmed pod: %+v, want %+v", got, want)
	}
}

// TestTrimPod: a built pod, trimmed for the cache, keeps its metadata, status,
// containers' names, Secret volumes and hostname, and nothing else of its spec.
func TestTrimPod(t *testing.T) {
	pod := build(t, testTA(), 1, plugin.Settings{DefaultCPU: "100m", DefaultMemory: "64Mi"})
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "executor"}}
	pod.Spec.Hostname, pod.Spec.NodeName = "h", "node-1"
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-creds"}}},
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "task", ContainerID: "c://1"}}}
	if len(pod.Spec.Containers) == 0 || len(pod.Spec.Containers[0].Env) == 0 || pod.Spec.Containers[0].Resources.Requests == nil {
		t.Fatalf("the built pod has no env or resources to drop: %+v", pod.Spec.Containers)
	}
	full := pod.DeepCopy()
	out, err := TrimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	if got.ManagedFields != nil || !reflect.DeepEqual(got.Labels, full.Labels) || !reflect.DeepEqual(got.Annotations, full.Annotations) ||
		!reflect.DeepEqual(got.OwnerReferences, full.OwnerReferences) || !reflect.DeepEqual(got.Status, full.Status) {
		t.Errorf("metadata or status changed: %+v", got.ObjectMeta)
	}
	if len(got.Spec.Containers) != len(full.Spec.Containers) || got.Spec.Containers[0].Name != full.Spec.Containers[0].Name ||
		got.Spec.Containers[0].Env != nil || got.Spec.Containers[0].Image != "" || got.Spec.Containers[0].Resources.Requests != nil {
		t.Errorf("containers: %+v, want the names only", got.Spec.Containers)
	}
	if len(got.Spec.Volumes) != 1 || got.Spec.Volumes[0].Secret == nil || got.Spec.Volumes[0].Secret.SecretName != "db-creds" {
		t.Errorf("volumes: %+v, want the Secret volume only", got.Spec.Volumes)
	}
	if got.Spec.Hostname != "h" || got.Spec.NodeName != "node-1" {
		t.Errorf("hostname/nodeName %q/%q", got.Spec.Hostname, got.Spec.NodeName)
	}
	if other, _ := TrimPod("not a pod"); other != "not a pod" {
		t.Errorf("a non-pod is changed: %v", other)
	}
}
