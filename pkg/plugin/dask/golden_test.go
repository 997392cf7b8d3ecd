package dask

import (
	"flag"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	daskv1 "github.com/dask/dask-kubernetes/v2023/dask_kubernetes/operator/go_client/pkg/apis/kubernetes.dask.org/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

// The golden facts under testdata/golden are what Flyte's own dask plugin
// creates: <case>.input.yaml holds a TaskAction as Flyte's actions service
// writes it (the template's bytes as they are) and the plugins.dask.logs
// section; <case>.flyte.yaml the DaskJob that Flyte's executor
// (flyteorg/flyte 6fadb90d65af26f4db908ec1c5f5af546a3e4299, the commit
// docs/flyte-compat.md follows) sends to the API server for it. A throwaway
// program, built outside this repository against that checkout and never
// committed, read each input into Flyte's TaskAction type, set Flyte's
// plugins.k8s section to plugintest.FlyteSettings' values and plugins.dask to the
// input's, ran one Handle of Flyte's k8s plugin manager for the dask plugin
// (which builds the DaskJob and adds the name, namespace, labels,
// annotations and owner reference) on a client that records the create,
// and printed the object with sigs.k8s.io/yaml. -update-inputs rewrites the
// inputs from the cases below; the facts must then be recorded again.
var updateInputs = flag.Bool("update-inputs", false, "rewrite testdata/golden/*.input.yaml from the cases")

// goldenInput is one <case>.input.yaml.
type goldenInput struct {
	// DaskLogs is the plugins.dask.logs section.
	DaskLogs   config.TaskLogConfig `json:"daskLogs"`
	TaskAction *flytev1.TaskAction  `json:"taskAction"`
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

func goldenCases() []goldenCase {
	return []goldenCase{
		// The SDK's shape: the task's image and resources for all, two workers.
		{name: "basic", logs: config.DefaultTaskLogConfig(), ta: func(t *testing.T) *flytev1.TaskAction {
			return flyteTaskAction(t, "rdask01", "n0", &core.TaskTemplate{
				Id: plugintest.TaskID("wf.dask_sum"), Type: "dask",
				Metadata: &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 1},
					Runtime: &core.RuntimeMetadata{Type: core.RuntimeMetadata_FLYTE_SDK, Version: "2.0.0"}},
				Target: &core.TaskTemplate_Container{Container: &core.Container{
					Image: "ghcr.io/flyteorg/dask:v1", Args: plugintest.SDKArgs("fn"),
					Env: []*core.KeyValuePair{{Key: "PYTHONUNBUFFERED", Value: "1"}},
					Resources: &core.Resources{
						Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "1"), plugintest.Res(core.Resources_MEMORY, "2Gi")},
						Limits:   []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "2"), plugintest.Res(core.Resources_MEMORY, "4Gi")},
					},
				}},
				Custom: plugintest.Custom(t, &plugins.DaskJob{Scheduler: &plugins.DaskScheduler{}, Workers: &plugins.DaskWorkerGroup{NumberOfWorkers: 2}}),
			})
		}},
		// Images and resources of their own for the scheduler (requests only)
		// and the workers (limits only, a fraction of a CPU), an interruptible
		// task (only the workers go to interruptible capacity), a secret.
		{name: "overrides-interruptible", logs: config.DefaultTaskLogConfig(), ta: func(t *testing.T) *flytev1.TaskAction {
			ta := flyteTaskAction(t, "rdask01", "n1", &core.TaskTemplate{
				Id: plugintest.TaskID("wf.dask_big"), Type: "dask",
				Metadata: &core.TaskMetadata{InterruptibleValue: &core.TaskMetadata_Interruptible{Interruptible: true}},
				Target: &core.TaskTemplate_Container{Container: &core.Container{
					Image: "ghcr.io/flyteorg/dask:v1", Args: plugintest.SDKArgs("fn"),
					Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "500m"), plugintest.Res(core.Resources_MEMORY, "1Gi")}},
				}},
				SecurityContext: &core.SecurityContext{Secrets: []*core.Secret{{Group: "aws", Key: "access-key", MountRequirement: core.Secret_ENV_VAR}}},
				Custom: plugintest.Custom(t, &plugins.DaskJob{
					Scheduler: &plugins.DaskScheduler{Image: "ghcr.io/dask/dask:2024.1.0",
						Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "250m"), plugintest.Res(core.Resources_MEMORY, "512Mi")}}},
					Workers: &plugins.DaskWorkerGroup{NumberOfWorkers: 4, Image: "ghcr.io/flyteorg/dask-worker:v1",
						Resources: &core.Resources{Limits: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "1500m"), plugintest.Res(core.Resources_MEMORY, "3Gi")}}},
				}),
			})
			interruptible := true
			ta.Spec.Interruptible = &interruptible
			return ta
		}},
		// A dashboard link in plugins.dask.logs gives the scheduler its
		// --dashboard-prefix; a pod-spec task with a sidecar and pod metadata.
		// Its links (the Kubernetes one, a dashboard, one with the scheduler's
		// name) are the facts of the status mapping too.
		{name: "dashboard-podspec", logs: config.TaskLogConfig{
			IsKubernetesEnabled:   true,
			KubernetesTemplateURI: "https://k8s.example.com/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}",
			Templates: []config.TaskLogTemplate{{
				DisplayName: "Dask Dashboard", LinkType: "dashboard",
				TemplateURIs: []string{"https://flyte.example.com/dask/{{ .namespace }}/{{ .generatedName }}/status"},
			}, {
				DisplayName: "Dask Logs", ShowWhilePending: true,
				TemplateURIs: []string{"https://logs.example.com/{{ .namespace }}/{{ .podName }}?scheduler={{ .daskSchedulerName }}&run={{ .executionName }}&retry={{ .taskRetryAttempt }}"},
			}},
		}, ta: func(t *testing.T) *flytev1.TaskAction {
			spec, err := structpb.NewStruct(map[string]any{
				"containers": []any{
					map[string]any{"name": "primary", "image": "ghcr.io/flyteorg/dask:v1", "args": []any{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}"},
						"volumeMounts": []any{map[string]any{"name": "scratch", "mountPath": "/scratch"}}},
					map[string]any{"name": "metrics", "image": "prom/statsd-exporter:v0.26.0",
						"resources": map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "32Mi"}}},
				},
				"volumes": []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			return flyteTaskAction(t, "rdask01", "n2", &core.TaskTemplate{
				Id: plugintest.TaskID("wf.dask_pod"), Type: "dask", Config: map[string]string{"primary_container_name": "primary"},
				Target: &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PodSpec: spec,
					Metadata: &core.K8SObjectMetadata{Labels: map[string]string{"team": "analytics"}, Annotations: map[string]string{"prometheus.io/scrape": "true"}}}},
				Custom: plugintest.Custom(t, &plugins.DaskJob{Workers: &plugins.DaskWorkerGroup{NumberOfWorkers: 1,
					Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_MEMORY, "2Gi")}}}}),
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
	in := goldenInput{DaskLogs: gc.logs, TaskAction: gc.ta(t)}
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

// TestGoldenDaskJobs: for each case, the DaskJob this plugin builds is,
// once the deliberate differences (asFlyte) are undone, byte for byte the
// DaskJob Flyte's dask plugin creates for the same TaskAction.
func TestGoldenDaskJobs(t *testing.T) {
	for _, gc := range goldenCases() {
		t.Run(gc.name, func(t *testing.T) {
			in := readInput(t, gc)
			tk, err := task.FromTaskAction(in.TaskAction)
			if err != nil {
				t.Fatal(err)
			}
			logs, err := tasklog.New(in.DaskLogs)
			if err != nil {
				t.Fatal(err)
			}
			p := &Plugin{logs: logs}
			job, err := p.build(plugin.TaskContext{TaskAction: in.TaskAction, Task: tk, Attempt: 1, Settings: plugintest.FlyteSettings()})
			if err != nil {
				t.Fatal(err)
			}
			got, err := yaml.Marshal(asFlyte(job, tk, plugintest.FlyteSettings()))
			if err != nil {
				t.Fatal(err)
			}
			path := goldenPath(gc.name, "flyte")
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v: record Flyte's DaskJob for %s", err, goldenPath(gc.name, "input"))
			}
			if string(got) != string(want) {
				t.Errorf("the DaskJob differs from Flyte's (%s), beyond the deliberate differences:\n%s", path, plugintest.LineDiff(string(want), string(got)))
			}
		})
	}
}

// asFlyte undoes, on a copy of job, the deliberate differences from Flyte's
// DaskJob that docs/engines/dask.md lists.
func asFlyte(job *daskv1.DaskJob, tk *task.Task, s plugin.Settings) *daskv1.DaskJob {
	out := job.DeepCopy()
	// Our owner reference also blocks the TaskAction's deletion until the
	// garbage collector removed the DaskJob.
	for i := range out.OwnerReferences {
		out.OwnerReferences[i].BlockOwnerDeletion = nil
	}
	// Flyte writes the job's labels and annotations, without the configured
	// default annotations, into spec.cluster.metadata, which the operator's
	// CRD does not have (the API server drops it).
	out.Spec.Cluster.ObjectMeta = metav1.ObjectMeta{Labels: maps.Clone(out.Labels), Annotations: maps.Clone(out.Annotations)}
	for k := range s.DefaultAnnotations {
		delete(out.Spec.Cluster.Annotations, k)
	}
	if len(out.Spec.Cluster.Annotations) == 0 {
		out.Spec.Cluster.Annotations = nil
	}
	// Flyte appends part of the environment in Go map order (its recorded
	// facts are sorted by name); ours has one entry per variable in a fixed
	// order (docs/flyte-compat.md, The pod).
	for _, spec := range []*corev1.PodSpec{&out.Spec.Job.Spec, &out.Spec.Cluster.Spec.Scheduler.Spec, &out.Spec.Cluster.Spec.Worker.Spec} {
		for i := range spec.Containers {
			c := &spec.Containers[i]
			sort.SliceStable(c.Env, func(a, b int) bool { return c.Env[a].Name < c.Env[b].Name })
			if tk.PodSpec == nil {
				continue
			}
			switch c.Name {
			case ContainerJobRunner, ContainerScheduler, ContainerWorker:
				// The pod builder's terminationMessagePolicy on the primary
				// container of a pod-spec task (Flyte sets it for container
				// targets only).
				c.TerminationMessagePolicy = ""
			default:
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
	}
	return out
}

// flytePhase is one entry of <case>.flyte-phases.yaml: what Flyte's dask
// plugin's GetTaskPhase says of the case's DaskJob with that status, in a
// cluster without pods (the recording program set each status on the
// DaskJob it had created and called GetTaskPhase with a client that holds
// no pods; here the operator's pods are never read: see ObserveJob).
type flytePhase struct {
	Status daskv1.DaskJobStatus `json:"status"`
	Phase  string               `json:"phase"`
	// Reason is Flyte's message; ours are worded differently.
	Reason string `json:"reason"`
	Error  *struct {
		Code, Kind, Message string
	} `json:"error"`
	Logs []plugintest.FlyteLog `json:"logs"`
}

// TestGoldenPhases: for each job status, the phase, error and log links
// are Flyte's, but for the readiness of the dashboard link (Flyte's is the
// scheduler pod's readiness, false here as the cluster has no pods; ours
// is whether the job runs).
func TestGoldenPhases(t *testing.T) {
	const name = "dashboard-podspec"
	var gc goldenCase
	for _, c := range goldenCases() {
		if c.name == name {
			gc = c
		}
	}
	in := readInput(t, gc)
	tk, err := task.FromTaskAction(in.TaskAction)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := tasklog.New(in.DaskLogs)
	if err != nil {
		t.Fatal(err)
	}
	p := &Plugin{logs: logs}
	tc := plugin.TaskContext{TaskAction: in.TaskAction, Task: tk, Attempt: 1, Settings: plugintest.FlyteSettings()}
	job, err := p.build(tc)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(goldenPath(name, "flyte-phases"))
	if err != nil {
		t.Fatal(err)
	}
	var facts []flytePhase
	if err := yaml.UnmarshalStrict(raw, &facts); err != nil {
		t.Fatal(err)
	}
	if len(facts) != 6 {
		t.Fatalf("%d recorded statuses, want 6", len(facts))
	}
	for _, f := range facts {
		t.Run(string(f.Status.JobStatus), func(t *testing.T) {
			j := job.DeepCopy()
			j.Status = f.Status
			obs := ObserveJob(j)
			if got := plugintest.FlytePhases[obs.Phase]; got != f.Phase {
				t.Errorf("phase %s (%s), Flyte's %s", obs.Phase, got, f.Phase)
			}
			switch {
			case f.Error == nil && obs.Error != nil:
				t.Errorf("error %+v, Flyte's none", obs.Error)
			case f.Error != nil && (obs.Error == nil || obs.Error.Code != f.Error.Code || string(obs.Error.Kind) != f.Error.Kind || obs.Error.Message != f.Error.Message):
				t.Errorf("error %+v, Flyte's %+v", obs.Error, *f.Error)
			}
			links, err := JobLogs(p.logs, tc, j, obs.Phase)
			if err != nil {
				t.Fatal(err)
			}
			var got []plugintest.FlyteLog
			for _, l := range links {
				if l.GetLinkType() == core.TaskLog_DASHBOARD {
					if l.GetReady() != (obs.Phase == plugin.PhaseRunning) {
						t.Errorf("dashboard ready %v in phase %s", l.GetReady(), obs.Phase)
					}
					l.Ready = false
				}
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
