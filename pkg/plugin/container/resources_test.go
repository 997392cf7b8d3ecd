package container

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

func rl(kv ...string) corev1.ResourceList {
	if len(kv) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestResources(t *testing.T) {
	flyteDefaults := plugin.Settings{DefaultCPU: "1000m", DefaultMemory: "1024Mi"}
	for _, tc := range []struct {
		name          string
		in            corev1.ResourceRequirements
		gpu           *task.GPUAccelerator
		s             plugin.Settings
		wantReq, wLim corev1.ResourceList
	}{
		{name: "nothing set: the defaults", s: flyteDefaults,
			wantReq: rl("cpu", "1", "memory", "1Gi"), wLim: rl("cpu", "1", "memory", "1Gi")},
		{name: "nothing set, no defaults"},
		{name: "a limit gives the request", in: corev1.ResourceRequirements{Limits: rl("cpu", "2")}, s: flyteDefaults,
			wantReq: rl("cpu", "2", "memory", "1Gi"), wLim: rl("cpu", "2", "memory", "1Gi")},
		{name: "a request gives the limit", in: corev1.ResourceRequirements{Requests: rl("memory", "3Gi")}, s: flyteDefaults,
			wantReq: rl("cpu", "1", "memory", "3Gi"), wLim: rl("cpu", "1", "memory", "3Gi")},
		{name: "a request above its limit is lowered", in: corev1.ResourceRequirements{Requests: rl("cpu", "4"), Limits: rl("cpu", "2")},
			wantReq: rl("cpu", "2"), wLim: rl("cpu", "2")},
		{name: "ephemeral storage only when asked for", in: corev1.ResourceRequirements{Requests: rl("ephemeral-storage", "5Gi")},
			wantReq: rl("ephemeral-storage", "5Gi"), wLim: rl("ephemeral-storage", "5Gi")},
		{name: "a generic gpu is an nvidia gpu", in: corev1.ResourceRequirements{Limits: rl("gpu", "1")},
			wantReq: rl("nvidia.com/gpu", "1"), wLim: rl("nvidia.com/gpu", "1")},
		{name: "the configured gpu resource", in: corev1.ResourceRequirements{Requests: rl("gpu", "2")}, s: plugin.Settings{GPUResourceName: "amd.com/gpu"},
			wantReq: rl("amd.com/gpu", "2"), wLim: rl("amd.com/gpu", "2")},
		{name: "the accelerator class's resource", in: corev1.ResourceRequirements{Limits: rl("gpu", "4")}, gpu: &task.GPUAccelerator{DeviceClass: "GOOGLE_TPU"},
			wantReq: rl("google.com/tpu", "4"), wLim: rl("google.com/tpu", "4")},
		{name: "other extended resources are left alone", in: corev1.ResourceRequirements{Requests: rl("example.com/fpga", "1")},
			wantReq: rl("example.com/fpga", "1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			tk := decode(t, ta)
			tk.Container.Resources = tc.in
			tk.Extended.GPU = tc.gpu
			pod, err := BuildPod(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: tc.s})
			if err != nil {
				t.Fatal(err)
			}
			got := pod.Spec.Containers[0].Resources
			if !equality.Semantic.DeepEqual(got.Requests, tc.wantReq) || !equality.Semantic.DeepEqual(got.Limits, tc.wLim) {
				t.Errorf("resources = %v / %v, want %v / %v", got.Requests, got.Limits, tc.wantReq, tc.wLim)
			}
		})
	}
	// Other containers keep their resources; only a generic gpu is renamed.
	ta := testTA()
	setPodSpec(t, ta, flytev1.PodTemplate{}, &corev1.PodSpec{Containers: []corev1.Container{{Name: "side", Image: "x",
		Resources: corev1.ResourceRequirements{Requests: rl("memory", "1Gi", "gpu", "1")}}}})
	side := container(t, build(t, ta, 1, flyteDefaults), "side")
	if !equality.Semantic.DeepEqual(side.Resources.Requests, rl("memory", "1Gi", "nvidia.com/gpu", "1")) || side.Resources.Limits != nil {
		t.Errorf("sidecar resources = %+v", side.Resources)
	}
}
