package task

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
)

func flyteTA(t *testing.T, tmpl *core.TaskTemplate) *flytev1.TaskAction {
	t.Helper()
	b, err := proto.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return &flytev1.TaskAction{Spec: flytev1.TaskActionSpec{
		RunName: "r1", Project: "p", Domain: "d", ActionName: "a0", TaskType: tmpl.GetType(),
		RunOutputBase: "s3://b/r1", TaskTemplate: b,
	}}
}

func entry(n core.Resources_ResourceName, v string) *core.Resources_ResourceEntry {
	return &core.Resources_ResourceEntry{Name: n, Value: v}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pythonTemplate() *core.TaskTemplate {
	return &core.TaskTemplate{
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Org: "o", Project: "tp", Domain: "td", Name: "mod.fn", Version: "abc"},
		Type: "python",
		Metadata: &core.TaskMetadata{
			Discoverable: true, DiscoveryVersion: "1.0", CacheSerializable: true, CacheIgnoreInputVars: []string{"seed"},
			Timeout: durationpb.New(90 * time.Second), Retries: &core.RetryStrategy{Retries: 3},
			InterruptibleValue: &core.TaskMetadata_Interruptible{Interruptible: true},
		},
		Interface: &core.TypedInterface{Inputs: &core.VariableMap{Variables: []*core.VariableEntry{{Key: "x", Value: &core.Variable{Description: "x"}}}}},
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ghcr.io/x/py:1", Command: []string{"a0"}, Args: []string{"--inputs", "{{.input}}"},
			Env: []*core.KeyValuePair{{Key: "A", Value: "1"}, {Key: "B", Value: "2"}},
			Resources: &core.Resources{
				Requests: []*core.Resources_ResourceEntry{entry(core.Resources_CPU, "500m"), entry(core.Resources_MEMORY, "1Gi"),
					entry(core.Resources_GPU, "1"), entry(core.Resources_EPHEMERAL_STORAGE, "0"), entry(core.Resources_STORAGE, "10Gi")},
				Limits: []*core.Resources_ResourceEntry{entry(core.Resources_CPU, "1"), entry(core.Resources_MEMORY, "2Gi"), entry(core.Resources_GPU, "1")},
			},
		}},
		SecurityContext: &core.SecurityContext{
			RunAs:   &core.Identity{K8SServiceAccount: "runner"},
			Secrets: []*core.Secret{{Group: "aws", Key: "token", MountRequirement: core.Secret_ENV_VAR, EnvVar: "TOKEN"}, {Key: "pw"}},
		},
		ExtendedResources: &core.ExtendedResources{
			GpuAccelerator: &core.GPUAccelerator{Device: "A100", DeviceClass: core.GPUAccelerator_NVIDIA_GPU, PartitionSizeValue: &core.GPUAccelerator_PartitionSize{PartitionSize: "1g.5gb"}},
			SharedMemory:   &core.SharedMemory{MountPath: "/dev/shm", MountName: "shm", SizeLimit: "1Gi"},
		},
		Config: map[string]string{"k": "v"},
	}
}

func TestFromTaskActionFlyteContainer(t *testing.T) {
	ta := flyteTA(t, pythonTemplate())
	got, err := FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	if got.Form != FormFlyte || got.Type != "python" || got.Retries != 3 || got.Timeout != 90*time.Second || !got.Interruptible ||
		got.ServiceAccount != "runner" || got.Config["k"] != "v" || got.PrimaryContainerName != "" {
		t.Errorf("task = %+v", got)
	}
	if got.ID != (Identifier{Org: "o", Project: "tp", Domain: "td", Name: "mod.fn", Version: "abc"}) {
		t.Errorf("id = %+v (the template's own identity, not the run's)", got.ID)
	}
	if got.Cache.Enabled != true || got.Cache.Version != "1.0" || !got.Cache.Serializable || len(got.Cache.IgnoreInputVars) != 1 {
		t.Errorf("cache = %+v", got.Cache)
	}
	wantRes := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi"), ResourceGPU: resource.MustParse("1")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi"), ResourceGPU: resource.MustParse("1")},
	}
	if !equality.Semantic.DeepEqual(got.Container.Resources, wantRes) {
		t.Errorf("resources = %v, want %v (zero and storage entries dropped)", got.Container.Resources, wantRes)
	}
	if c := got.Container; c.Image != "ghcr.io/x/py:1" || len(c.Env) != 2 || c.Env[1] != (corev1.EnvVar{Name: "B", Value: "2"}) || c.Args[1] != "{{.input}}" {
		t.Errorf("container = %+v", c)
	}
	if len(got.Secrets) != 2 || got.Secrets[0] != (Secret{Group: "aws", Key: "token", Mount: MountEnvVar, EnvVar: "TOKEN"}) || got.Secrets[1].Mount != MountAny {
		t.Errorf("secrets = %+v", got.Secrets)
	}
	if g := got.Extended.GPU; g == nil || *g != (GPUAccelerator{Device: "A100", DeviceClass: "NVIDIA_GPU", PartitionSize: "1g.5gb"}) {
		t.Errorf("gpu = %+v", g)
	}
	if m := got.Extended.SharedMemory; m == nil || m.SizeLimit != "1Gi" {
		t.Errorf("shared memory = %+v", m)
	}
	if len(got.Interface) == 0 || len(got.Raw) == 0 {
		t.Errorf("interface %d bytes, raw %d bytes", len(got.Interface), len(got.Raw))
	}
	// The run's interruptible setting overrides the template's.
	ta.Spec.Interruptible = ptr.To(false)
	if got, _ := FromTaskAction(ta); got.Interruptible {
		t.Error("spec.interruptible=false did not override the template")
	}
}

func TestFromTaskActionFlytePodTargets(t *testing.T) {
	podSpec := map[string]any{"containers": []any{
		map[string]any{"name": "primary", "image": "py:1", "args": []any{"run"}},
		map[string]any{"name": "sidecar", "image": "envoy:1", "ports": []any{map[string]any{"containerPort": 8080}}},
	}}
	for _, tc := range []struct {
		name     string
		tmpl     *core.TaskTemplate
		primary  string
		labels   map[string]string
		nPodCont int
	}{
		{
			name: "k8s pod, primary in config",
			tmpl: &core.TaskTemplate{Type: "python", Config: map[string]string{"primary_container_name": "primary"},
				Target: &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PodSpec: nil, Metadata: &core.K8SObjectMetadata{Labels: map[string]string{"team": "ml"}}}}},
			primary: "primary", labels: map[string]string{"team": "ml"}, nPodCont: 2,
		},
		{
			name: "k8s pod, primary in the target",
			tmpl: &core.TaskTemplate{Type: "python",
				Target: &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PrimaryContainerName: "sidecar"}}},
			primary: "sidecar", nPodCont: 2,
		},
		{
			name: "sidecar version 1: custom is the pod spec",
			tmpl: &core.TaskTemplate{Type: "sidecar", TaskTypeVersion: 1, Config: map[string]string{"primary_container_name": "primary"},
				Target: &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{Metadata: &core.K8SObjectMetadata{Labels: map[string]string{"x": "y"}}}}},
			primary: "primary", labels: map[string]string{"x": "y"}, nPodCont: 2,
		},
		{
			name:    "sidecar version 0: custom is a sidecar job",
			tmpl:    &core.TaskTemplate{Type: "sidecar"},
			primary: "primary", labels: map[string]string{"job": "1"}, nPodCont: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			switch {
			case tc.tmpl.Type == "sidecar" && tc.tmpl.TaskTypeVersion == 0:
				tc.tmpl.Custom = mustStruct(t, map[string]any{"podSpec": podSpec, "primaryContainerName": "primary", "labels": map[string]any{"job": "1"}})
			case tc.tmpl.Type == "sidecar":
				tc.tmpl.Custom = mustStruct(t, podSpec)
			default:
				tc.tmpl.GetK8SPod().PodSpec = mustStruct(t, podSpec)
			}
			got, err := FromTaskAction(flyteTA(t, tc.tmpl))
			if err != nil {
				t.Fatal(err)
			}
			if got.Container != nil || got.PodSpec == nil || len(got.PodSpec.Containers) != tc.nPodCont || got.PrimaryContainerName != tc.primary {
				t.Fatalf("task = %+v", got)
			}
			if p := got.PodSpec.Containers[1].Ports; len(p) != 1 || p[0].ContainerPort != 8080 {
				t.Errorf("ports = %+v", p)
			}
			if !equality.Semantic.DeepEqual(got.PodLabels, tc.labels) {
				t.Errorf("labels = %v, want %v", got.PodLabels, tc.labels)
			}
		})
	}
}

func TestFromTaskActionFlyteErrors(t *testing.T) {
	withPod := func(spec *structpb.Struct, cfg map[string]string) *core.TaskTemplate {
		return &core.TaskTemplate{Type: "python", Config: cfg, Target: &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PodSpec: spec}}}
	}
	twoContainers := map[string]any{"containers": []any{map[string]any{"name": "a", "image": "i"}}}
	primaryA := map[string]string{"primary_container_name": "a"}
	for _, tc := range []struct {
		name          string
		tmpl          func(t *testing.T) *core.TaskTemplate
		raw           []byte
		field, reason string
	}{
		{name: "not a protobuf message", raw: []byte{0xff, 0xff, 0xff}, field: "spec.taskTemplate", reason: "not a serialized flyteidl2.core.TaskTemplate"},
		{name: "no target", tmpl: func(*testing.T) *core.TaskTemplate { return &core.TaskTemplate{Type: "python"} }, field: "spec.taskTemplate", reason: "no container or k8sPod target"},
		{name: "container without image", tmpl: func(*testing.T) *core.TaskTemplate {
			return &core.TaskTemplate{Target: &core.TaskTemplate_Container{Container: &core.Container{}}}
		}, field: "spec.taskTemplate.container.image", reason: "is required"},
		{name: "bad quantity", tmpl: func(*testing.T) *core.TaskTemplate {
			tm := pythonTemplate()
			tm.GetContainer().Resources.Limits[1].Value = "two gigs"
			return tm
		}, field: "spec.taskTemplate.container.resources.limits[1]", reason: `MEMORY value "two gigs"`},
		// Exponents that would never finish expanding: refused before any parse.
		{name: "huge exponent", tmpl: func(*testing.T) *core.TaskTemplate {
			tm := pythonTemplate()
			tm.GetContainer().Resources.Requests[0].Value = "1e2147483648"
			return tm
		}, field: "spec.taskTemplate.container.resources.requests[0]", reason: "exponent"},
		{name: "huge negative exponent", tmpl: func(*testing.T) *core.TaskTemplate {
			tm := pythonTemplate()
			tm.GetContainer().Resources.Limits[0].Value = "1e-2147483648"
			return tm
		}, field: "spec.taskTemplate.container.resources.limits[0]", reason: "exponent"},
		{name: "huge exponent of the shared memory", tmpl: func(*testing.T) *core.TaskTemplate {
			tm := pythonTemplate()
			tm.ExtendedResources.SharedMemory.SizeLimit = "1E2147483648"
			return tm
		}, field: "spec.taskTemplate.extendedResources.sharedMemory.sizeLimit", reason: "exponent"},
		{name: "huge exponent in the pod spec", tmpl: func(t *testing.T) *core.TaskTemplate {
			return withPod(mustStruct(t, map[string]any{"containers": []any{map[string]any{"name": "a", "image": "x",
				"resources": map[string]any{"limits": map[string]any{"memory": "1e2147483648"}}}}}), primaryA)
		}, field: "spec.taskTemplate.k8sPod.podSpec.containers[0].resources.limits.memory", reason: "exponent"},
		{name: "unknown mount requirement", tmpl: func(*testing.T) *core.TaskTemplate {
			tm := pythonTemplate()
			tm.SecurityContext.Secrets[1].MountRequirement = 9
			return tm
		}, field: "spec.taskTemplate.securityContext.secrets[1].mountRequirement", reason: "unknown mount requirement 9"},
		{name: "negative timeout", tmpl: func(*testing.T) *core.TaskTemplate {
			tm := pythonTemplate()
			tm.Metadata.Timeout = durationpb.New(-time.Second)
			return tm
		}, field: "spec.taskTemplate.metadata.timeout", reason: "must not be negative"},
		{name: "invalid duration", tmpl: func(*testing.T) *core.TaskTemplate {
			tm := pythonTemplate()
			tm.Metadata.Timeout = &durationpb.Duration{Seconds: 1, Nanos: -5}
			return tm
		}, field: "spec.taskTemplate.metadata.timeout", reason: "duration"},
		{name: "retries beyond int32", tmpl: func(*testing.T) *core.TaskTemplate {
			tm := pythonTemplate()
			tm.Metadata.Retries.Retries = 1 << 31
			return tm
		}, field: "spec.taskTemplate.metadata.retries.retries", reason: "too large"},
		{name: "shared memory size", tmpl: func(*testing.T) *core.TaskTemplate {
			tm := pythonTemplate()
			tm.ExtendedResources.SharedMemory.SizeLimit = "big"
			return tm
		}, field: "spec.taskTemplate.extendedResources.sharedMemory.sizeLimit", reason: "not a Kubernetes quantity"},
		{name: "co-pilot data config", tmpl: func(*testing.T) *core.TaskTemplate {
			tm := pythonTemplate()
			tm.GetContainer().DataConfig = &core.DataLoadingConfig{Enabled: true}
			return tm
		}, field: "spec.taskTemplate.container.dataConfig", reason: "not supported"},
		{name: "pod target without pod spec", tmpl: func(*testing.T) *core.TaskTemplate { return withPod(nil, primaryA) },
			field: "spec.taskTemplate.k8sPod.podSpec", reason: "is required"},
		{name: "containers is an object", tmpl: func(t *testing.T) *core.TaskTemplate {
			return withPod(mustStruct(t, map[string]any{"containers": map[string]any{"name": "a"}}), primaryA)
		}, field: "spec.taskTemplate.k8sPod.podSpec.containers", reason: "must be a list, got a JSON object"},
		{name: "a field a pod spec does not have", tmpl: func(t *testing.T) *core.TaskTemplate {
			return withPod(mustStruct(t, map[string]any{"containers": []any{}, "restartPolicyy": "Never"}), primaryA)
		}, field: "spec.taskTemplate.k8sPod.podSpec", reason: `unknown field "restartPolicyy"`},
		{name: "no primary container named", tmpl: func(t *testing.T) *core.TaskTemplate { return withPod(mustStruct(t, twoContainers), nil) },
			field: "spec.taskTemplate.config.primary_container_name", reason: "must name the primary container"},
		{name: "primary container not in the pod spec", tmpl: func(t *testing.T) *core.TaskTemplate {
			return withPod(mustStruct(t, twoContainers), map[string]string{"primary_container_name": "b"})
		}, field: "spec.taskTemplate.config.primary_container_name", reason: `names container "b"`},
		{name: "sidecar job without pod spec", tmpl: func(t *testing.T) *core.TaskTemplate {
			return &core.TaskTemplate{Type: "sidecar", Custom: mustStruct(t, map[string]any{"primaryContainerName": "a"})}
		}, field: "spec.taskTemplate.custom.podSpec", reason: "is required"},
		{name: "sidecar job that is not one", tmpl: func(t *testing.T) *core.TaskTemplate {
			return &core.TaskTemplate{Type: "sidecar", Custom: mustStruct(t, map[string]any{"podSpec": "x"})}
		}, field: "spec.taskTemplate.custom.podSpec", reason: "must be a pod spec object"},
		{name: "sidecar v1 without primary", tmpl: func(t *testing.T) *core.TaskTemplate {
			return &core.TaskTemplate{Type: "sidecar", TaskTypeVersion: 1, Custom: mustStruct(t, twoContainers)}
		}, field: "spec.taskTemplate.config.primary_container_name", reason: "must name the primary container"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ta *flytev1.TaskAction
			if tc.raw != nil {
				ta = &flytev1.TaskAction{Spec: flytev1.TaskActionSpec{TaskTemplate: tc.raw}}
			} else {
				ta = flyteTA(t, tc.tmpl(t))
			}
			_, err := FromTaskAction(ta)
			wantFieldErr(t, err, tc.field, tc.reason)
		})
	}
}
