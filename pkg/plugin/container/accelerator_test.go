package container

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

func TestExtendedResources(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limits    corev1.ResourceList
		gpu       *task.GPUAccelerator
		wantReqs  []corev1.NodeSelectorRequirement
		wantTols  []corev1.Toleration
		wantSlice string
	}{
		{
			name: "a known device and a MIG partition", limits: rl("gpu", "1"),
			gpu: &task.GPUAccelerator{Device: "a100", DeviceClass: "NVIDIA_GPU", PartitionSize: "3g.40gb"},
			wantReqs: []corev1.NodeSelectorRequirement{
				{Key: "k8s.amazonaws.com/accelerator", Operator: corev1.NodeSelectorOpIn, Values: []string{"nvidia-tesla-a100"}},
				{Key: "k8s.amazonaws.com/gpu-partition-size", Operator: corev1.NodeSelectorOpIn, Values: []string{"3g.40gb"}},
			},
			wantTols: []corev1.Toleration{
				{Key: "k8s.amazonaws.com/accelerator", Operator: corev1.TolerationOpEqual, Value: "nvidia-tesla-a100", Effect: corev1.TaintEffectNoSchedule},
				{Key: "k8s.amazonaws.com/gpu-partition-size", Operator: corev1.TolerationOpEqual, Value: "3g.40gb", Effect: corev1.TaintEffectNoSchedule},
			},
			wantSlice: "3",
		},
		{
			name: "a TPU, whole", limits: rl("gpu", "4"), gpu: &task.GPUAccelerator{Device: "v5p", DeviceClass: "GOOGLE_TPU", Unpartitioned: true},
			wantReqs: []corev1.NodeSelectorRequirement{
				{Key: "cloud.google.com/gke-tpu-accelerator", Operator: corev1.NodeSelectorOpIn, Values: []string{"tpu-v5p-slice"}},
				{Key: "cloud.google.com/gke-tpu-topology", Operator: corev1.NodeSelectorOpDoesNotExist},
			},
			wantTols: []corev1.Toleration{{Key: "cloud.google.com/gke-tpu-accelerator", Operator: corev1.TolerationOpEqual, Value: "tpu-v5p-slice", Effect: corev1.TaintEffectNoSchedule}},
		},
		{
			name: "an unknown device name is used as it is", limits: rl("nvidia.com/gpu", "1"), gpu: &task.GPUAccelerator{Device: "X9"},
			wantReqs: []corev1.NodeSelectorRequirement{{Key: "k8s.amazonaws.com/accelerator", Operator: corev1.NodeSelectorOpIn, Values: []string{"X9"}}},
			wantTols: []corev1.Toleration{{Key: "k8s.amazonaws.com/accelerator", Operator: corev1.TolerationOpEqual, Value: "X9", Effect: corev1.TaintEffectNoSchedule}},
		},
		{name: "no accelerator asked for: no placement", gpu: &task.GPUAccelerator{Device: "A100", PartitionSize: "1g.5gb"}, wantSlice: "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			tk := decode(t, ta)
			tk.Container.Resources.Limits = tc.limits
			tk.Extended.GPU = tc.gpu
			pod, err := BuildPod(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1})
			if err != nil {
				t.Fatal(err)
			}
			var reqs []corev1.NodeSelectorRequirement
			if na := pod.Spec.Affinity.NodeAffinity; na != nil {
				reqs = na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions
			}
			if !reflect.DeepEqual(reqs, tc.wantReqs) || !reflect.DeepEqual(pod.Spec.Tolerations, tc.wantTols) {
				t.Errorf("requirements = %+v\ntolerations = %+v", reqs, pod.Spec.Tolerations)
			}
			if got := pod.Labels[LabelGPUPartitionSlices]; got != tc.wantSlice {
				t.Errorf("partition slices label = %q, want %q", got, tc.wantSlice)
			}
		})
	}

	ta := testTA()
	tk := decode(t, ta)
	tk.Extended.SharedMemory = &task.SharedMemory{MountName: "shm", MountPath: "/dev/shm", SizeLimit: "2Gi"}
	pod, err := BuildPod(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	size := resource.MustParse("2Gi")
	wantVol := corev1.Volume{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}}
	if len(pod.Spec.Volumes) != 1 || !equality.Semantic.DeepEqual(pod.Spec.Volumes[0], wantVol) ||
		!reflect.DeepEqual(pod.Spec.Containers[0].VolumeMounts, []corev1.VolumeMount{{Name: "shm", MountPath: "/dev/shm"}}) {
		t.Errorf("volumes = %+v, mounts = %+v", pod.Spec.Volumes, pod.Spec.Containers[0].VolumeMounts)
	}
	for _, clash := range []struct {
		spec    corev1.PodSpec
		contain string
	}{
		{corev1.PodSpec{Volumes: []corev1.Volume{{Name: "shm"}}}, `already has a volume named "shm"`},
		{corev1.PodSpec{Containers: []corev1.Container{{Name: "task", VolumeMounts: []corev1.VolumeMount{{Name: "x", MountPath: "/dev/shm"}}}}}, "/dev/shm is already mounted"},
	} {
		tk.PodSpec = clash.spec.DeepCopy()
		_, err := BuildPod(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1})
		wantBadSpec(t, err, clash.contain)
	}
}
