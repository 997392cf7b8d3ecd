package ray

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/task"
)

// The files testdata/golden/<case>.flyte.yaml are facts: the RayJob Flyte's
// own Ray plugin built for each case's TaskAction, flyteorg/flyte at
// 6fadb90d65af26f4db908ec1c5f5af546a3e4299 (the commit docs/flyte-compat.md
// follows). A throwaway program, built outside this repository against that
// checkout and never committed, read each TaskAction as -golden-inputs writes
// it (JSON), built the task execution context as Flyte's executor builds it
// from a TaskAction (executor/pkg/plugin NewTaskExecutionContext, an
// in-memory data store), with Flyte's plugins.k8s settings set as
// flyteSettings below and plugins.ray at its defaults, called the Ray
// plugin's BuildResource and the k8s plugin manager's addObjectMetadata (name,
// namespace, labels, annotations, owner reference), and printed the object as
// YAML (sigs.k8s.io/yaml), after a first line with the SHA-256 of the JSON it
// read. TestGoldenRayJobs checks that hash against the TaskAction it builds
// from, applies the deliberate differences (flyteDifferences, each listed in
// docs/engines/ray.md) to Flyte's object and requires the result, as YAML, to
// equal the plugin's RayJob byte for byte.
var goldenInputs = flag.String("golden-inputs", "", "write each golden case's TaskAction, as JSON, into this directory")

// flyteSettings are the executor settings of a Flyte deployment as its chart
// configures plugins.k8s (plugintest.FlyteSettings), with a default
// toleration.
func flyteSettings() plugin.Settings {
	s := plugintest.FlyteSettings()
	s.DefaultTolerations = []corev1.Toleration{{Key: "flyte.org/node-role", Operator: corev1.TolerationOpEqual, Value: "worker", Effect: corev1.TaintEffectNoSchedule}}
	return s
}

// flyteTaskAction is a TaskAction as Flyte's actions service applies it: its
// name, labels, owner reference to the parent, the run's env vars, and the
// template's bytes.
func flyteTaskAction(t *testing.T, run, action, parent string, tmpl *core.TaskTemplate) *flytev1.TaskAction {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	root := parent == ""
	ta := &flytev1.TaskAction{
		TypeMeta: metav1.TypeMeta{APIVersion: "flyte.org/v1", Kind: "TaskAction"},
		ObjectMeta: metav1.ObjectMeta{
			Name: run + "-" + action, Namespace: "flytesnacks-development", UID: "6a3c2f0e-0000-4000-8000-000000000001",
			Labels: map[string]string{
				"flyte.org/project": "flytesnacks", "flyte.org/domain": "development", "flyte.org/run": run,
				"flyte.org/action": action, "flyte.org/action-type": "task", "flyte.org/is-root": map[bool]string{true: "true", false: "false"}[root],
			},
		},
		Spec: flytev1.TaskActionSpec{
			RunName: run, Project: "flytesnacks", Domain: "development", ActionName: action,
			InputURI:      "s3://flyte-data/flytesnacks/development/" + run + "/" + action + "/inputs.pb",
			RunOutputBase: "s3://flyte-data/flytesnacks/development/" + run + "/",
			TaskType:      tmpl.GetType(), ShortName: tmpl.GetId().GetName(), TaskTemplate: b,
			EnvVars: map[string]string{"LOG_LEVEL": "10"},
		},
	}
	if !root {
		ta.Spec.ParentActionName = &parent
		bod := true
		ta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "flyte.org/v1", Kind: "TaskAction", Name: run + "-a0",
			UID: "6a3c2f0e-0000-4000-8000-000000000000", BlockOwnerDeletion: &bod}}
	}
	return ta
}

const rayImage = "ghcr.io/flyteorg/ray:py3.12-2.44"

type goldenCase struct {
	name    string
	attempt int32
	ta      func(t *testing.T) *flytev1.TaskAction
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{name: "workers", attempt: 1, ta: func(t *testing.T) *flytev1.TaskAction {
			return flyteTaskAction(t, "rk7x2m9q4t", "a0", "", &core.TaskTemplate{
				Id: plugintest.TaskID("wf.train"), Type: "ray",
				Metadata: &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 1},
					Runtime: &core.RuntimeMetadata{Type: core.RuntimeMetadata_FLYTE_SDK, Version: "2.0.0"}},
				Target: &core.TaskTemplate_Container{Container: &core.Container{
					Image: rayImage, Args: plugintest.SDKArgs("train"),
					Env: []*core.KeyValuePair{{Key: "PYTHONUNBUFFERED", Value: "1"}},
					Resources: &core.Resources{
						Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "2"), plugintest.Res(core.Resources_MEMORY, "4Gi")},
						Limits:   []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_MEMORY, "8Gi")},
					},
				}},
				Custom: plugintest.Custom(t, &plugins.RayJob{
					RayCluster: &plugins.RayCluster{
						HeadGroupSpec: &plugins.HeadGroupSpec{RayStartParams: map[string]string{"num-cpus": "0"}},
						WorkerGroupSpec: []*plugins.WorkerGroupSpec{{GroupName: "workers", Replicas: 2, MinReplicas: 1, MaxReplicas: 4,
							RayStartParams: map[string]string{"num-cpus": "2"}}},
					},
					RuntimeEnvYaml:           "pip:\n- numpy==2.1.0\n",
					ShutdownAfterJobFinishes: true, TtlSecondsAfterFinished: 600,
				}),
			})
		}},
		{name: "defaults", attempt: 2, ta: func(t *testing.T) *flytev1.TaskAction {
			runtimeEnv := base64.StdEncoding.EncodeToString([]byte(`{"pip":["pandas==2.2.3"],"env_vars":{"STAGE":"dev"}}`))
			ta := flyteTaskAction(t, "rk7x2m9q4t", "n3", "a0", &core.TaskTemplate{
				Id: plugintest.TaskID("wf.prepare"), Type: "ray",
				Metadata: &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 2},
					InterruptibleValue: &core.TaskMetadata_Interruptible{Interruptible: true}},
				Target: &core.TaskTemplate_Container{Container: &core.Container{Image: rayImage, Args: plugintest.SDKArgs("train")}},
				SecurityContext: &core.SecurityContext{
					RunAs:   &core.Identity{K8SServiceAccount: "ray-runner"},
					Secrets: []*core.Secret{{Group: "aws", Key: "access-key", MountRequirement: core.Secret_ENV_VAR}},
				},
				Custom: plugintest.Custom(t, &plugins.RayJob{
					RayCluster: &plugins.RayCluster{
						HeadGroupSpec:   &plugins.HeadGroupSpec{},
						WorkerGroupSpec: []*plugins.WorkerGroupSpec{{GroupName: "default", Replicas: 1}},
					},
					RuntimeEnv: runtimeEnv,
				}),
			})
			interruptible := true
			ta.Spec.Interruptible = &interruptible
			ta.Status.Attempts = 2
			return ta
		}},
		{name: "group-pods", attempt: 1, ta: func(t *testing.T) *flytev1.TaskAction {
			return flyteTaskAction(t, "rk7x2m9q4t", "n4", "a0", &core.TaskTemplate{
				Id: plugintest.TaskID("wf.tune"), Type: "ray",
				Target: &core.TaskTemplate_Container{Container: &core.Container{Image: rayImage, Args: plugintest.SDKArgs("train"),
					Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "1"), plugintest.Res(core.Resources_MEMORY, "2Gi")}}}},
				ExtendedResources: &core.ExtendedResources{SharedMemory: &core.SharedMemory{MountPath: "/dev/shm", MountName: "shm"}},
				Custom: plugintest.Custom(t, &plugins.RayJob{
					RayCluster: &plugins.RayCluster{
						HeadGroupSpec: &plugins.HeadGroupSpec{
							K8SPod: &core.K8SPod{
								Metadata: &core.K8SObjectMetadata{Labels: map[string]string{"team": "ml"}, Annotations: map[string]string{"note": "head"}},
								PodSpec: plugintest.Struct(t, map[string]any{
									"containers": []any{map[string]any{"name": "ray-head", "resources": map[string]any{
										"requests": map[string]any{"cpu": "4", "memory": "16Gi"}, "limits": map[string]any{"cpu": "4", "memory": "16Gi"}}}},
									"tolerations": []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "ray", "effect": "NoSchedule"}},
								}),
							},
						},
						WorkerGroupSpec: []*plugins.WorkerGroupSpec{{
							GroupName: "gpu", Replicas: 2, MinReplicas: 3, MaxReplicas: 1,
							ExtendedResources: &core.ExtendedResources{GpuAccelerator: &core.GPUAccelerator{Device: "A100",
								PartitionSizeValue: &core.GPUAccelerator_PartitionSize{PartitionSize: "1g.5gb"}}},
							K8SPod: &core.K8SPod{PodSpec: plugintest.Struct(t, map[string]any{
								"containers":   []any{map[string]any{"name": "ray-worker", "resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1"}}}},
								"nodeSelector": map[string]any{"pool": "gpu"},
							})},
						}},
						EnableAutoscaling: true,
						AutoscalerOptions: &plugins.AutoscalerOptions{
							UpscalingMode: plugins.AutoscalerOptions_UPSCALING_MODE_AGGRESSIVE, IdleTimeoutSeconds: 120,
							Image:     "rayproject/ray:2.44.0",
							Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "500m"), plugintest.Res(core.Resources_MEMORY, "512Mi")}},
							Env:       []*core.KeyValuePair{{Key: "RAY_LOG_LEVEL", Value: "debug"}},
						},
					},
				}),
			})
		}},
		{name: "pod-target", attempt: 1, ta: func(t *testing.T) *flytev1.TaskAction {
			return flyteTaskAction(t, "rk7x2m9q4t", "train-model-with-a-long-descriptive-name", "a0", &core.TaskTemplate{
				Id: plugintest.TaskID("wf.serve"), Type: "ray", Config: map[string]string{"primary_container_name": "main"},
				Target: &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{
					Metadata: &core.K8SObjectMetadata{Labels: map[string]string{"app": "serve"}},
					PodSpec: plugintest.Struct(t, map[string]any{
						"containers": []any{
							map[string]any{"name": "log-shipper", "image": "fluent/fluent-bit:3.0",
								"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "64Mi"}}},
							map[string]any{"name": "main", "image": rayImage, "args": toAny(plugintest.SDKArgs("train"))},
						},
					}),
				}},
				Custom: plugintest.Custom(t, &plugins.RayJob{
					RayCluster: &plugins.RayCluster{HeadGroupSpec: &plugins.HeadGroupSpec{RayStartParams: map[string]string{"dashboard-host": "127.0.0.1"}}},
				}),
			})
		}},
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// inputJSON is the TaskAction as the throwaway program read it.
func inputJSON(t *testing.T, ta *flytev1.TaskAction) []byte {
	t.Helper()
	b, err := json.Marshal(ta)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGoldenRayJobs(t *testing.T) {
	for _, gc := range goldenCases() {
		t.Run(gc.name, func(t *testing.T) {
			ta := gc.ta(t)
			in := inputJSON(t, ta)
			if *goldenInputs != "" {
				if err := os.WriteFile(filepath.Join(*goldenInputs, gc.name+".json"), in, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tk, err := task.FromTaskAction(ta)
			if err != nil {
				t.Fatal(err)
			}
			job, err := Build(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: gc.attempt, Settings: flyteSettings()}, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			got, err := yaml.Marshal(job)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", gc.name+".flyte.yaml")
			fact, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			header, body, _ := strings.Cut(string(fact), "\n")
			sum := sha256.Sum256(in)
			if want := "# input sha256: " + hex.EncodeToString(sum[:]); header != want {
				t.Fatalf("%s was printed from another TaskAction: its header is %q, this case's is %q", path, header, want)
			}
			flyte := &rayv1.RayJob{}
			if err := yaml.UnmarshalStrict([]byte(body), flyte); err != nil {
				t.Fatal(err)
			}
			flyteDifferences(flyte, job)
			want, err := yaml.Marshal(flyte)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("the RayJob differs from Flyte's (%s) beyond the listed differences:\n%s", path, plugintest.LineDiff(string(want), string(got)))
			}
		})
	}
}

// flyteDifferences turns Flyte's RayJob into this plugin's by the deliberate
// differences of docs/engines/ray.md, each a step below. Ours is read only
// for what Flyte left to chance (the order of the environment variables it
// takes from Go maps) and for a name's hash.
func flyteDifferences(flyte, ours *rayv1.RayJob) {
	// The owner reference also blocks the TaskAction's deletion until the
	// RayJob is gone (as on pods).
	for i := range flyte.OwnerReferences {
		bod := true
		flyte.OwnerReferences[i].BlockOwnerDeletion = &bod
	}
	// A name Flyte would give beyond KubeRay's 47 characters it replaces by
	// "f" and a hash; ours keeps a readable prefix (JobName, names_test.go).
	taName, attempt := flyte.OwnerReferences[0].Name, flyte.Labels["attempt"]
	if n, _ := strconv.Atoi(attempt); len(fmt.Sprintf("%s-%d", taName, n-1)) > MaxJobNameLength {
		flyte.Name = ours.Name
	}
	templates := []*corev1.PodTemplateSpec{&flyte.Spec.RayClusterSpec.HeadGroupSpec.Template}
	oursTemplates := []*corev1.PodTemplateSpec{&ours.Spec.RayClusterSpec.HeadGroupSpec.Template}
	for i := range flyte.Spec.RayClusterSpec.WorkerGroupSpecs {
		templates = append(templates, &flyte.Spec.RayClusterSpec.WorkerGroupSpecs[i].Template)
		oursTemplates = append(oursTemplates, &ours.Spec.RayClusterSpec.WorkerGroupSpecs[i].Template)
	}
	for i, tmpl := range templates {
		spec := &tmpl.Spec
		// KubeRay takes the first container for Ray's: the Ray container
		// comes first (Flyte keeps the task's pod's order).
		for j, c := range spec.Containers {
			if (c.Name == HeadContainerName || c.Name == WorkerContainerName) && j > 0 {
				copy(spec.Containers[1:j+1], spec.Containers[:j])
				spec.Containers[0] = c
			}
		}
		for j := range spec.Containers {
			c := &spec.Containers[j]
			if j == 0 {
				// The task's container reports its end as its log tail,
				// pod-spec tasks included (docs/flyte-compat.md, the pod).
				if c.TerminationMessagePolicy == "" {
					c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
				}
			} else {
				// Other containers keep their resources: Flyte writes zero
				// CPU and memory into them.
				dropZero(c.Resources.Requests)
				dropZero(c.Resources.Limits)
			}
			// One entry per variable in a deterministic order: Flyte takes
			// the run's and the default variables from Go maps.
			orderLike(c.Env, containerEnv(oursTemplates[i].Spec.Containers, c.Name))
		}
		// Shared memory without a size gets no sizeLimit (Flyte writes 0).
		for _, v := range spec.Volumes {
			if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.IsZero() {
				v.EmptyDir.SizeLimit = nil
			}
		}
	}
	// The submitter runs the Ray container's image (Flyte: the first
	// container's, the same once the Ray container is first).
	if s := flyte.Spec.SubmitterPodTemplate; s != nil {
		s.Spec.Containers[0].Image = flyte.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0].Image
	}
}

func dropZero(l corev1.ResourceList) {
	for k, q := range l {
		if q.IsZero() {
			delete(l, k)
		}
	}
}

func containerEnv(cs []corev1.Container, name string) []corev1.EnvVar {
	for _, c := range cs {
		if c.Name == name {
			return c.Env
		}
	}
	return nil
}

// mapOrdered are the variables Flyte's executor takes from Go maps: the
// run's (and the four it sets beside them) and the configured defaults.
func mapOrdered(name string) bool {
	switch name {
	case "ACTION_NAME", "RUN_NAME", "_U_RUN_BASE", "_U_ORG_NAME", "LOG_LEVEL", "_U_EP_OVERRIDE", "_U_INSECURE", "_U_USE_ACTIONS":
		return true
	}
	return false
}

// orderLike permutes the map-ordered variables of env among their own
// positions into the order their names have in like (values stay env's);
// the others stay in place.
func orderLike(env, like []corev1.EnvVar) {
	rank := map[string]int{}
	for i, e := range like {
		rank[e.Name] = i
	}
	var pos []int
	var vars []corev1.EnvVar
	for i, e := range env {
		if mapOrdered(e.Name) {
			pos = append(pos, i)
			vars = append(vars, e)
		}
	}
	sort.SliceStable(vars, func(a, b int) bool { return rank[vars[a].Name] < rank[vars[b].Name] })
	for k, i := range pos {
		env[i] = vars[k]
	}
}
