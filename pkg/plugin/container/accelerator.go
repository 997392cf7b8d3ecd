package container

import (
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/quantity"
	"github.com/taskaction/executor/pkg/task"
)

// accelerator is how one class of accelerator appears on a node: the resource
// a container requests, and the node labels of the device model and partition.
type accelerator struct {
	resourceName   corev1.ResourceName
	deviceLabel    string
	partitionLabel string
}

// Flyte's defaults for the accelerator device classes.
const (
	defaultGPUResourceName   corev1.ResourceName = "nvidia.com/gpu"
	defaultGPUDeviceLabel                        = "k8s.amazonaws.com/accelerator"
	defaultGPUPartitionLabel                     = "k8s.amazonaws.com/gpu-partition-size"
)

var deviceClasses = map[string]accelerator{
	"NVIDIA_GPU":    {resourceName: "nvidia.com/gpu"},
	"GOOGLE_TPU":    {resourceName: "google.com/tpu", deviceLabel: "cloud.google.com/gke-tpu-accelerator", partitionLabel: "cloud.google.com/gke-tpu-topology"},
	"AMAZON_NEURON": {resourceName: "aws.amazon.com/neuron"},
	"AMD_GPU":       {resourceName: "amd.com/gpu"},
	"HABANA_GAUDI":  {resourceName: "habana.ai/gaudi"},
}

// acceleratorDevices maps the device names tasks use (upper case) to the
// values of the device node label, Flyte's default table.
var acceleratorDevices = map[string]string{
	"A10": "nvidia-a10", "A10G": "nvidia-a10g", "A100": "nvidia-tesla-a100", "A100 80G": "nvidia-a100-80gb",
	"A100G": "nvidia-a100g", "B200": "nvidia-b200", "GB200": "nvidia-gb200", "H100": "nvidia-h100",
	"H100 80G": "nvidia-h100-80gb", "H100 MEGA 80G": "nvidia-h100-mega-80gb", "H200": "nvidia-h200",
	"K80": "nvidia-tesla-k80", "L4": "nvidia-l4", "L40S": "nvidia-l40s", "L4_VWS": "nvidia-l4-vws",
	"M60": "nvidia-tesla-m60", "P4": "nvidia-tesla-p4", "P100": "nvidia-tesla-p100",
	"RTX PRO 6000": "nvidia-rtx-pro-6000", "T4": "nvidia-tesla-t4", "V100": "nvidia-tesla-v100",
	"V5E": "tpu-v5-lite-podslice", "V5P": "tpu-v5p-slice", "V6E": "tpu-v6e-slice",
	"INF1": "aws-neuron-inf1", "INF2": "aws-neuron-inf2", "TRN1": "aws-neuron-trn1", "TRN1N": "aws-neuron-trn1n",
	"TRN2": "aws-neuron-trn2", "TRN2U": "aws-neuron-trn2u",
	"MI100": "amd-mi100", "MI210": "amd-mi210", "MI250": "amd-mi250", "MI250X": "amd-mi250x", "MI300A": "amd-mi300a",
	"MI300X": "amd-mi300x", "MI325X": "amd-mi325x", "MI350X": "amd-mi350x", "MI355X": "amd-mi355x",
	"GAUDI1": "habana-gaudi-dl1",
}

// migPartition matches NVIDIA MIG partition sizes such as "3g.40gb".
var migPartition = regexp.MustCompile(`^(\d+)g\.\d+gb$`)

func gpuResourceName(s plugin.Settings) corev1.ResourceName {
	if s.GPUResourceName != "" {
		return s.GPUResourceName
	}
	return defaultGPUResourceName
}

// acceleratorFor is the accelerator of the task's device class (the global
// GPU settings when it names none).
func acceleratorFor(g *task.GPUAccelerator, s plugin.Settings) accelerator {
	a := accelerator{resourceName: gpuResourceName(s), deviceLabel: defaultGPUDeviceLabel, partitionLabel: defaultGPUPartitionLabel}
	if g == nil {
		return a
	}
	if c, ok := deviceClasses[g.DeviceClass]; ok {
		if c.resourceName != "" {
			a.resourceName = c.resourceName
		}
		if c.deviceLabel != "" {
			a.deviceLabel = c.deviceLabel
		}
		if c.partitionLabel != "" {
			a.partitionLabel = c.partitionLabel
		}
	}
	return a
}

// acceleratorResourceNames are every resource name an accelerator may have.
func acceleratorResourceNames(s plugin.Settings) []corev1.ResourceName {
	seen := map[corev1.ResourceName]bool{gpuResourceName(s): true}
	for _, c := range deviceClasses {
		seen[c.resourceName] = true
	}
	out := make([]corev1.ResourceName, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// renameGPU turns a generic "gpu" quantity into the accelerator's resource.
func renameGPU(l corev1.ResourceList, name corev1.ResourceName) {
	if q, ok := l[task.ResourceGPU]; ok {
		l[name] = q
		delete(l, task.ResourceGPU)
	}
}

// applyExtendedResources places a pod that uses an accelerator on nodes with
// the device and partition asked for, and mounts the shared memory volume
// into the primary container (index primary). Labels the pod needs go into labels.
func applyExtendedResources(spec *corev1.PodSpec, primary int, ext task.ExtendedResources, a accelerator, s plugin.Settings, labels map[string]string) error {
	if g := ext.GPU; g != nil {
		if usesAccelerator(spec, acceleratorResourceNames(s)) {
			placeOnAccelerator(spec, g, a)
		}
		if m := migPartition.FindStringSubmatch(g.PartitionSize); m != nil {
			labels[LabelGPUPartitionSlices] = m[1]
		}
	}
	if m := ext.SharedMemory; m != nil {
		return mountSharedMemory(spec, primary, m)
	}
	return nil
}

// PlaceOnAccelerator gives spec the node affinity and tolerations of the
// accelerator g when a container of spec has a limit on an accelerator, as
// BuildPod does (idempotent): for a pod spec an engine plugin changed after
// BuildPod built it (a replica's own resources laid over the task's).
func PlaceOnAccelerator(spec *corev1.PodSpec, g *task.GPUAccelerator, s plugin.Settings) {
	if g != nil && usesAccelerator(spec, acceleratorResourceNames(s)) {
		placeOnAccelerator(spec, g, acceleratorFor(g, s))
	}
}

// usesAccelerator says whether a container of the pod has a limit on one of names.
func usesAccelerator(spec *corev1.PodSpec, names []corev1.ResourceName) bool {
	for _, c := range spec.Containers {
		for _, n := range names {
			if _, ok := c.Resources.Limits[n]; ok {
				return true
			}
		}
	}
	return false
}

func placeOnAccelerator(spec *corev1.PodSpec, g *task.GPUAccelerator, a accelerator) {
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if g.Device != "" {
		device := g.Device
		if d, ok := acceleratorDevices[strings.ToUpper(device)]; ok {
			device = d
		}
		RequireInEveryTerm(spec.Affinity, corev1.NodeSelectorRequirement{Key: a.deviceLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{device}})
		addToleration(spec, corev1.Toleration{Key: a.deviceLabel, Operator: corev1.TolerationOpEqual, Value: device, Effect: corev1.TaintEffectNoSchedule})
	}
	switch {
	case g.PartitionSize != "":
		RequireInEveryTerm(spec.Affinity, corev1.NodeSelectorRequirement{Key: a.partitionLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{g.PartitionSize}})
		addToleration(spec, corev1.Toleration{Key: a.partitionLabel, Operator: corev1.TolerationOpEqual, Value: g.PartitionSize, Effect: corev1.TaintEffectNoSchedule})
	case g.Unpartitioned:
		RequireInEveryTerm(spec.Affinity, corev1.NodeSelectorRequirement{Key: a.partitionLabel, Operator: corev1.NodeSelectorOpDoesNotExist})
	}
}

// addToleration appends t unless an equal toleration is there.
func addToleration(spec *corev1.PodSpec, t corev1.Toleration) {
	for i := range spec.Tolerations {
		if t.MatchToleration(&spec.Tolerations[i]) {
			return
		}
	}
	spec.Tolerations = append(spec.Tolerations, t)
}

func mountSharedMemory(spec *corev1.PodSpec, primary int, m *task.SharedMemory) error {
	switch {
	case m.MountName == "":
		return badSpec("extended resources: the shared memory mount name is not set")
	case m.MountPath == "":
		return badSpec("extended resources: the shared memory mount path is not set")
	}
	for _, v := range spec.Volumes {
		if v.Name == m.MountName {
			return badSpec("extended resources: the pod already has a volume named %q", m.MountName)
		}
	}
	c := &spec.Containers[primary]
	for _, vm := range c.VolumeMounts {
		if vm.Name == m.MountName {
			return badSpec("extended resources: the primary container already mounts a volume named %q", m.MountName)
		}
		if vm.MountPath == m.MountPath {
			return badSpec("extended resources: %s is already mounted in the primary container", m.MountPath)
		}
	}
	ed := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
	if m.SizeLimit != "" {
		q, err := quantity.Parse(m.SizeLimit)
		if err != nil {
			return badSpec("extended resources: shared memory size limit: %v", err)
		}
		ed.SizeLimit = &q
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: m.MountName, VolumeSource: corev1.VolumeSource{EmptyDir: ed}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: m.MountName, MountPath: m.MountPath})
	return nil
}
