package clustered

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

// The golden facts under testdata/golden are what Flyte's own clustered
// plugin creates: <case>.input.yaml holds a TaskAction as Flyte's actions
// service writes it (the template's bytes as they are) and the plugins.logs
// section; <case>.flyte.yaml the JobSet that Flyte's executor (flyteorg/flyte
// 6fadb90d65af26f4db908ec1c5f5af546a3e4299, the commit docs/flyte-compat.md
// follows) sends to the API server for it. A throwaway program, built
// outside this repository against that checkout and never committed, read
// each input into Flyte's TaskAction type, set Flyte's plugins.k8s section
// to flyteSettings' values and plugins.logs to the input's, ran one Handle of
// Flyte's k8s plugin manager for the clustered-task plugin (which builds the
// JobSet and adds the name, namespace, labels, annotations and owner
// reference) on a client that records the create, and printed the object
// with sigs.k8s.io/yaml, the containers' environment sorted by name (Flyte
// adds part of it in Go's map order). -update-inputs rewrites the inputs
// from the cases below; the facts must then be recorded again.
var updateInputs = flag.Bool("update-inputs", false, "rewrite testdata/golden/*.input.yaml from the cases")

// goldenInput is one <case>.input.yaml.
type goldenInput struct {
	// Logs is the plugins.logs section.
	Logs       config.TaskLogConfig `json:"logs"`
	TaskAction *flytev1.TaskAction  `json:"taskAction"`
}

// flyteSettings are the pod settings of a Flyte deployment
// (plugintest.FlyteSettings) with logs rendering the links.
func flyteSettings(logs *tasklog.Renderer) plugin.Settings {
	s := plugintest.FlyteSettings()
	s.TaskLogs = logs
	return s
}

// flyteTaskAction is a TaskAction as Flyte's actions service applies it.
func flyteTaskAction(t *testing.T, run, action string, tmpl *core.TaskTemplate) *flytev1.TaskAction {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	parent := "a0"
	bod := true
	return &flytev1.TaskAction{
		TypeMeta: metav1.TypeMeta{APIVersion: "flyte.org/v1", Kind: "TaskAction"},
		ObjectMeta: metav1.ObjectMeta{
			Name: run + "-" + action, Namespace: "flyte", UID: "6a3c2f0e-0000-4000-8000-000000000001",
			Labels: map[string]string{
				"flyte.org/project": "flytesnacks", "flyte.org/domain": "development", "flyte.org/run": run,
				"flyte.org/action": action, "flyte.org/action-type": "task", "flyte.org/is-root": "false",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "flyte.org/v1", Kind: "TaskAction", Name: run + "-a0",
				UID: "6a3c2f0e-0000-4000-8000-000000000000", BlockOwnerDeletion: &bod}},
		},
		Spec: flytev1.TaskActionSpec{
			RunName: run, Project: "flytesnacks", Domain: "development", ActionName: action, ParentActionName: &parent,
			InputURI:      "s3://flyte-data/flytesnacks/development/" + run + "/" + action + "/inputs.pb",
			RunOutputBase: "s3://flyte-data/flytesnacks/development/" + run + "/",
			TaskType:      tmpl.GetType(), ShortName: tmpl.GetId().GetName(), TaskTemplate: b,
			EnvVars: map[string]string{"LOG_LEVEL": "10"},
		},
	}
}

type goldenCase struct {
	name string
	logs config.TaskLogConfig
	ta   func(t *testing.T) *flytev1.TaskAction
}

func torchrun(b plugins.RdzvBackend) *plugins.Runtime {
	return &plugins.Runtime{Kind: &plugins.Runtime_Torchrun{Torchrun: &plugins.TorchRuntime{RdzvBackend: b}}}
}

func goldenCases() []goldenCase {
	return []goldenCase{
		// The SDK's shape: two nodes of eight GPUs, static rendezvous, no restarts.
		{name: "basic", logs: config.DefaultTaskLogConfig(), ta: func(t *testing.T) *flytev1.TaskAction {
			return flyteTaskAction(t, "rclu01", "n0", &core.TaskTemplate{
				Id: plugintest.TaskID("train.ddp"), Type: ID,
				Metadata: &core.TaskMetadata{Runtime: &core.RuntimeMetadata{Type: core.RuntimeMetadata_FLYTE_SDK, Version: "2.0.0"}},
				Target: &core.TaskTemplate_Container{Container: &core.Container{
					Image: "ghcr.io/flyteorg/torch:v1", Command: []string{"python", "-m", "flyte.distributed._entrypoint"}, Args: plugintest.SDKArgs("train"),
					Resources: &core.Resources{
						Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "8"), plugintest.Res(core.Resources_MEMORY, "64Gi"), plugintest.Res(core.Resources_GPU, "8")},
						Limits:   []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "8"), plugintest.Res(core.Resources_MEMORY, "64Gi"), plugintest.Res(core.Resources_GPU, "8")},
					},
				}},
				ExtendedResources: &core.ExtendedResources{GpuAccelerator: &core.GPUAccelerator{Device: "H100"},
					SharedMemory: &core.SharedMemory{MountPath: "/dev/shm", MountName: "shm", SizeLimit: "16Gi"}},
				Custom: plugintest.Custom(t, &plugins.ClusteredTaskSpec{Replicas: 2, NprocPerNode: 8, Runtime: torchrun(plugins.RdzvBackend_STATIC)}),
			})
		}},
		// Rendezvous c10d, restarts and a TTL, an interconnect (not applied,
		// as in Flyte), an interruptible task whose environment names one of
		// torchrun's variables, a secret, and a name too long for the pods'
		// names (hashed).
		{name: "c10d-restarts-longname", logs: config.DefaultTaskLogConfig(), ta: func(t *testing.T) *flytev1.TaskAction {
			ta := flyteTaskAction(t, "rclu01averyveryverylongrunnamexxxxxxxxxxxx", "n1", &core.TaskTemplate{
				Id: plugintest.TaskID("train.elastic"), Type: ID,
				Metadata: &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 2}, InterruptibleValue: &core.TaskMetadata_Interruptible{Interruptible: true}},
				Target: &core.TaskTemplate_Container{Container: &core.Container{
					Image: "ghcr.io/flyteorg/torch:v1", Args: plugintest.SDKArgs("train"),
					Env: []*core.KeyValuePair{{Key: "MASTER_PORT", Value: "1234"}, {Key: "NCCL_DEBUG", Value: "INFO"}},
				}},
				SecurityContext: &core.SecurityContext{Secrets: []*core.Secret{{Group: "hf", Key: "token", MountRequirement: core.Secret_ENV_VAR}}},
				Custom: plugintest.Custom(t, &plugins.ClusteredTaskSpec{Replicas: 4, NprocPerNode: 1, Runtime: torchrun(plugins.RdzvBackend_C10D),
					Interconnect:            plugins.Interconnect_EFA,
					FailurePolicy:           &plugins.ClusterFailurePolicy{MaxRestarts: 3, RestartOnHostMaintenance: true},
					TtlSecondsAfterFinished: wrapperspb.UInt32(3600)}),
			})
			interruptible := true
			ta.Spec.Interruptible = &interruptible
			return ta
		}},
		// A pod-spec task with a sidecar and pod metadata; links of its own
		// (for the facts of the status mapping).
		{name: "podspec", logs: config.TaskLogConfig{
			IsKubernetesEnabled:   true,
			KubernetesTemplateURI: "https://k8s.example.com/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}",
			Templates: []config.TaskLogTemplate{{
				DisplayName: "Rank Logs ", ShowWhilePending: true,
				TemplateURIs: []string{"https://logs.example.com/{{ .namespace }}/{{ .podName }}/{{ .containerName }}?from={{ .podRFC3339StartTime }}&run={{ .executionName }}&retry={{ .taskRetryAttempt }}"},
			}},
		}, ta: func(t *testing.T) *flytev1.TaskAction {
			spec, err := structpb.NewStruct(map[string]any{
				"containers": []any{
					map[string]any{"name": "trainer", "image": "ghcr.io/flyteorg/torch:v1", "args": []any{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}"},
						"volumeMounts": []any{map[string]any{"name": "data", "mountPath": "/data"}}},
					map[string]any{"name": "profiler", "image": "ghcr.io/example/profiler:v2",
						"resources": map[string]any{"requests": map[string]any{"cpu": "100m"}, "limits": map[string]any{"cpu": "200m", "memory": "128Mi"}}},
				},
				"volumes": []any{map[string]any{"name": "data", "emptyDir": map[string]any{}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			return flyteTaskAction(t, "rclu01", "n2", &core.TaskTemplate{
				Id: plugintest.TaskID("train.pod"), Type: ID, Config: map[string]string{"primary_container_name": "trainer"},
				Target: &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PodSpec: spec,
					Metadata: &core.K8SObjectMetadata{Labels: map[string]string{"team": "ml"}, Annotations: map[string]string{"prometheus.io/scrape": "true"}}}},
				Custom: plugintest.Custom(t, &plugins.ClusteredTaskSpec{Replicas: 3, NprocPerNode: 2}),
			})
		}},
	}
}

func goldenPath(name, kind string) string {
	return filepath.Join("testdata", "golden", name+"."+kind+".yaml")
}

// readInput reads a case's recorded input, checking that the case still
// builds it (so that the facts recorded from it are the facts of the case).
func readInput(t *testing.T, gc goldenCase) goldenInput {
	t.Helper()
	in := goldenInput{Logs: gc.logs, TaskAction: gc.ta(t)}
	want, err := yaml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	path := goldenPath(gc.name, "input")
	if *updateInputs {
		plugintest.WriteFile(t, path, want)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is not the case's input any more (rewrite it with -update-inputs and record Flyte's object again):\n%s", path, plugintest.LineDiff(string(got), string(want)))
	}
	return in
}

// contextFor is the first attempt of a case's TaskAction.
func contextFor(t *testing.T, in goldenInput) plugin.TaskContext {
	t.Helper()
	tk, err := task.FromTaskAction(in.TaskAction)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := tasklog.New(in.Logs)
	if err != nil {
		t.Fatal(err)
	}
	return plugin.TaskContext{TaskAction: in.TaskAction, Task: tk, Attempt: 1, Settings: flyteSettings(logs)}
}

// TestGoldenJobSets: for each case, the JobSet this plugin builds is, once
// the deliberate differences (asFlyte) are undone, byte for byte the JobSet
// Flyte's clustered plugin creates for the same TaskAction.
func TestGoldenJobSets(t *testing.T) {
	for _, gc := range goldenCases() {
		t.Run(gc.name, func(t *testing.T) {
			tc := contextFor(t, readInput(t, gc))
			js, err := (&Plugin{}).build(tc)
			if err != nil {
				t.Fatal(err)
			}
			got, err := yaml.Marshal(asFlyte(js, tc.Task))
			if err != nil {
				t.Fatal(err)
			}
			path := goldenPath(gc.name, "flyte")
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v: record Flyte's JobSet for %s", err, goldenPath(gc.name, "input"))
			}
			if string(got) != string(want) {
				t.Errorf("the JobSet differs from Flyte's (%s), beyond the deliberate differences:\n%s", path, plugintest.LineDiff(string(want), string(got)))
			}
		})
	}
}

// asFlyte undoes, on a copy of js, the deliberate differences from Flyte's
// JobSet that docs/engines/clustered.md lists.
func asFlyte(js *jobsetv1alpha2.JobSet, tk *task.Task) *jobsetv1alpha2.JobSet {
	out := js.DeepCopy()
	// Our owner reference also blocks the TaskAction's deletion until the
	// garbage collector removed the JobSet.
	for i := range out.OwnerReferences {
		out.OwnerReferences[i].BlockOwnerDeletion = nil
	}
	// The JobSet also carries the pod metadata of the template (Flyte puts it
	// on the pods only).
	for k := range tk.PodLabels {
		delete(out.Labels, k)
	}
	for k := range tk.PodAnnotations {
		delete(out.Annotations, k)
	}
	for i := range out.Spec.ReplicatedJobs {
		spec := &out.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		for j := range spec.Containers {
			c := &spec.Containers[j]
			// Flyte appends part of the environment in Go map order (its
			// recorded facts are sorted by name); ours has one entry per
			// variable in a fixed order (docs/flyte-compat.md, The pod).
			sort.SliceStable(c.Env, func(a, b int) bool { return c.Env[a].Name < c.Env[b].Name })
			if tk.PodSpec == nil {
				continue
			}
			if c.Name == out.Annotations[AnnotationPrimaryContainer] {
				// The pod builder's terminationMessagePolicy on the primary
				// container of a pod-spec task (Flyte sets it for container
				// targets only).
				c.TerminationMessagePolicy = ""
				continue
			}
			// Flyte writes zero CPU and memory requests and limits where the other
			// containers of a pod-spec task have none (docs/flyte-compat.md, The pod).
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				for _, l := range []*corev1.ResourceList{&c.Resources.Requests, &c.Resources.Limits} {
					if _, ok := (*l)[r]; !ok {
						if *l == nil {
							*l = corev1.ResourceList{}
						}
						(*l)[r] = resource.MustParse("0")
					}
				}
			}
		}
	}
	return out
}

// flytePhase is one entry of <case>.flyte-phases.yaml: what Flyte's
// clustered plugin's GetTaskPhase says of the case's JobSet, created at
// 08:00:00 UTC on 2026-12-07, with that status, in a cluster without pods
// and with no plugin state (the recording program set each status on the
// JobSet it had created and called GetTaskPhase with a client that holds no
// pods; here the JobSet's pods are never read: see ObserveJobSet).
type flytePhase struct {
	Status jobsetv1alpha2.JobSetStatus `json:"status"`
	Phase  string                      `json:"phase"`
	Reason string                      `json:"reason"`
	Error  *struct {
		Code, Kind, Message string
	} `json:"error"`
	Logs []plugintest.FlyteLog `json:"logs"`
}

// TestGoldenPhases: for each JobSet status, the phase, message, error and
// log links are Flyte's, but for a suspended JobSet, which is queued here
// (Flyte: running).
func TestGoldenPhases(t *testing.T) {
	const name = "podspec"
	var gc goldenCase
	for _, c := range goldenCases() {
		if c.name == name {
			gc = c
		}
	}
	tc := contextFor(t, readInput(t, gc))
	js, err := (&Plugin{}).build(tc)
	if err != nil {
		t.Fatal(err)
	}
	js.CreationTimestamp = metav1.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	raw, err := os.ReadFile(goldenPath(name, "flyte-phases"))
	if err != nil {
		t.Fatal(err)
	}
	var facts []flytePhase
	if err := yaml.UnmarshalStrict(raw, &facts); err != nil {
		t.Fatal(err)
	}
	if len(facts) != 11 {
		t.Fatalf("%d recorded statuses, want 11", len(facts))
	}
	for i, f := range facts {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			j := js.DeepCopy()
			j.Status = f.Status
			obs := ObserveJobSet(j, tc.TaskAction, tc.Attempt)
			suspended := false
			if c := CurrentCondition(j.Status.Conditions); c != nil && c.Type == string(jobsetv1alpha2.JobSetSuspended) {
				suspended = true
				if obs.Phase != plugin.PhaseQueued || f.Phase != "PhaseRunning" {
					t.Errorf("suspended: %s, Flyte's %s", obs.Phase, f.Phase)
				}
			} else if got := plugintest.FlytePhases[obs.Phase]; got != f.Phase {
				t.Errorf("phase %s (%s), Flyte's %s", obs.Phase, got, f.Phase)
			}
			if !obs.Phase.IsTerminal() && !suspended && obs.Message != f.Reason {
				t.Errorf("message %q, Flyte's %q", obs.Message, f.Reason)
			}
			switch {
			case f.Error == nil && obs.Error != nil:
				t.Errorf("error %+v, Flyte's none", obs.Error)
			case f.Error != nil && (obs.Error == nil || obs.Error.Code != f.Error.Code || string(obs.Error.Kind) != f.Error.Kind || obs.Error.Message != f.Error.Message):
				t.Errorf("error %+v, Flyte's %+v", obs.Error, *f.Error)
			}
			links, err := JobSetLogs(tc.Settings.TaskLogs, tc, j, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			var got []plugintest.FlyteLog
			for _, l := range links {
				got = append(got, plugintest.FlyteLogOf(l))
			}
			gy, _ := yaml.Marshal(got)
			wy, _ := yaml.Marshal(f.Logs)
			if string(gy) != string(wy) {
				t.Errorf("links differ from Flyte's:\n%s", plugintest.LineDiff(string(wy), string(gy)))
			}
		})
	}
}
