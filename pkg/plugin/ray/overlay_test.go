package ray

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestOverlayPodSpec(t *testing.T) {
	f, tr := false, true
	grace := int64(30)
	size := resource.MustParse("1Gi")
	base := &corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "ray-head", Image: "ray:1", Args: []string{"a"},
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
			Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}},
		}},
		NodeSelector:       map[string]string{"a": "1"},
		Tolerations:        []corev1.Toleration{{Key: "t1"}},
		EnableServiceLinks: &f,
		Volumes:            []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}}},
	}
	small := resource.MustParse("64Mi")
	overlay := &corev1.PodSpec{
		Containers: []corev1.Container{
			{Name: "ray-head", Image: "ray:2", Env: []corev1.EnvVar{{Name: "B", Value: "2"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
					Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}}},
			{Name: "unknown", Image: "busybox"},
		},
		InitContainers:                []corev1.Container{{Name: "init", Image: "busybox"}},
		NodeSelector:                  map[string]string{"b": "2", "a": "3"},
		Tolerations:                   []corev1.Toleration{{Key: "t2"}},
		EnableServiceLinks:            &tr,
		TerminationGracePeriodSeconds: &grace,
		Volumes:                       []corev1.Volume{{Name: "w", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &small}}}},
	}
	baseBefore, overlayBefore := base.DeepCopy(), overlay.DeepCopy()
	got := overlayPodSpec(base, overlay)
	if !reflect.DeepEqual(base, baseBefore) || !reflect.DeepEqual(overlay, overlayBefore) {
		t.Fatal("an argument was modified")
	}
	c := got.Containers
	if len(c) != 1 {
		t.Fatalf("containers = %+v: the overlay's container the base lacks is dropped, as in Flyte", c)
	}
	if c[0].Image != "ray:2" || !reflect.DeepEqual(c[0].Args, []string{"a"}) {
		t.Errorf("image %s args %v: a set value replaces, an unset one keeps", c[0].Image, c[0].Args)
	}
	if !reflect.DeepEqual(c[0].Env, []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}) {
		t.Errorf("env = %+v: lists are appended", c[0].Env)
	}
	r := c[0].Resources
	if r.Requests.Cpu().String() != "4" || r.Requests.Memory().String() != "1Gi" || r.Limits.Name("nvidia.com/gpu", resource.DecimalSI).String() != "1" {
		t.Errorf("resources = %+v: maps are merged key by key, a quantity replaced whole", r)
	}
	if p := c[0].ReadinessProbe.HTTPGet.Port; p != intstr.FromInt32(8080) {
		t.Errorf("probe port = %+v: a self-encoding value is replaced whole", p)
	}
	if len(got.InitContainers) != 0 {
		t.Errorf("init containers = %+v: the base has none to merge with", got.InitContainers)
	}
	if !reflect.DeepEqual(got.NodeSelector, map[string]string{"a": "3", "b": "2"}) {
		t.Errorf("node selector = %v", got.NodeSelector)
	}
	if len(got.Tolerations) != 2 || got.Tolerations[1].Key != "t2" {
		t.Errorf("tolerations = %+v", got.Tolerations)
	}
	if !*got.EnableServiceLinks || *got.TerminationGracePeriodSeconds != 30 {
		t.Errorf("pointers: links %v grace %v", *got.EnableServiceLinks, got.TerminationGracePeriodSeconds)
	}
	if len(got.Volumes) != 2 || got.Volumes[0].EmptyDir.SizeLimit.String() != "1Gi" || got.Volumes[1].EmptyDir.SizeLimit.String() != "64Mi" {
		t.Errorf("volumes = %+v", got.Volumes)
	}
}

// TestOverlayFalseKeeps: an overlay's false or zero does not unset the
// base's value (it cannot be told from unset), as in Flyte.
func TestOverlayFalseKeeps(t *testing.T) {
	tr, f := true, false
	got := overlayPodSpec(&corev1.PodSpec{HostNetwork: true, EnableServiceLinks: &tr}, &corev1.PodSpec{EnableServiceLinks: &f})
	if !got.HostNetwork || !*got.EnableServiceLinks {
		t.Errorf("host network %v, links %v", got.HostNetwork, *got.EnableServiceLinks)
	}
}
