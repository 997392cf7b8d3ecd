package dask

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
)

// TestJobSpec: the DaskJob message comes from Flyte's template custom or
// the typed form's config; unknown fields are ignored as Flyte ignores
// them; a task without one, or with one that is not a DaskJob, is a bad
// task specification.
func TestJobSpec(t *testing.T) {
	withUnknown, err := structpb.NewStruct(map[string]any{"workers": map[string]any{"numberOfWorkers": 3, "futureField": true}, "extra": "x"})
	if err != nil {
		t.Fatal(err)
	}
	notAJob, err := structpb.NewStruct(map[string]any{"workers": "many"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		task    *task.Task
		workers uint32
		err     string
	}{
		{"Flyte: custom", plugintest.FlyteTask(t, &core.TaskTemplate{Custom: plugintest.Custom(t, &plugins.DaskJob{Workers: &plugins.DaskWorkerGroup{NumberOfWorkers: 5}})}), 5, ""},
		{"Flyte: unknown fields", plugintest.FlyteTask(t, &core.TaskTemplate{Custom: withUnknown}), 3, ""},
		{"Flyte: no custom", plugintest.FlyteTask(t, &core.TaskTemplate{}), 0, "no custom DaskJob"},
		{"Flyte: not a DaskJob", plugintest.FlyteTask(t, &core.TaskTemplate{Custom: notAJob}), 0, "not a DaskJob"},
		{"typed: config", &task.Task{Form: task.FormTyped, Config: map[string]string{ConfigKeyCustom: `{"workers": {"number_of_workers": 2}}`}}, 2, ""},
		{"typed: empty object", &task.Task{Form: task.FormTyped, Config: map[string]string{ConfigKeyCustom: `{}`}}, 0, ""},
		{"typed: no config", &task.Task{Form: task.FormTyped}, 0, "spec.template.config.custom is required"},
		{"typed: not JSON", &task.Task{Form: task.FormTyped, Config: map[string]string{ConfigKeyCustom: `workers: 2`}}, 0, "not a DaskJob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, err := JobSpec(tc.task)
			if tc.err != "" {
				plugintest.WantUserFailure(t, err, CodeBadTaskSpecification, tc.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := job.GetWorkers().GetNumberOfWorkers(); got != tc.workers {
				t.Errorf("workers = %d, want %d", got, tc.workers)
			}
		})
	}
}

// TestJobName: the pod's name when the operator's derived names fit a
// DNS-1035 label; else a shortened, hashed name that does, distinct for
// distinct TaskActions and the same on every call.
func TestJobName(t *testing.T) {
	long := strings.Repeat("a", 50) + "-n0"
	for _, tc := range []struct {
		ta      string
		attempt int32
		want    string
	}{
		{"rdask01-n0", 1, "rdask01-n0-0"},
		{"rdask01-n0", 3, "rdask01-n0-2"},
		{"rdask01-n0", 0, "rdask01-n0-0"},
		{strings.Repeat("b", 51), 1, strings.Repeat("b", 51) + "-0"},
	} {
		if got := JobName(tc.ta, tc.attempt); got != tc.want {
			t.Errorf("JobName(%q, %d) = %q, want %q", tc.ta, tc.attempt, got, tc.want)
		}
	}
	for _, name := range []string{long, long + "x", "0starts-with-a-digit", "Upper_Case.Name", strings.Repeat("z", 63)} {
		for _, attempt := range []int32{1, 12} {
			got := JobName(name, attempt)
			if len(got) > maxJobNameLen {
				t.Errorf("JobName(%q) = %q: %d characters, want at most %d", name, got, len(got), maxJobNameLen)
			}
			if errs := validation.IsDNS1035Label(got + "-scheduler"); len(errs) > 0 {
				t.Errorf("JobName(%q) = %q: the scheduler Service's name is not a DNS-1035 label: %v", name, got, errs)
			}
			if JobName(name, attempt) != got {
				t.Errorf("JobName(%q) is not stable", name)
			}
		}
	}
	if JobName(long, 1) == JobName(long+"x", 1) {
		t.Errorf("two long names share the job name %q", JobName(long, 1))
	}
}

// TestWorkerArgs: the limits set the worker's threads (whole CPUs, rounded
// up) and memory, as Flyte's; without limits only the name is passed.
func TestWorkerArgs(t *testing.T) {
	base := "dask worker --name $(DASK_WORKER_NAME)"
	for _, tc := range []struct {
		name string
		res  corev1.ResourceRequirements
		want string
	}{
		{"no limits", corev1.ResourceRequirements{}, base},
		{"whole CPUs", corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")}},
			base + " --nthreads 4 --memory-limit 8Gi"},
		{"a fraction rounds up", corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("3G")}},
			base + " --nthreads 2 --memory-limit 3G"},
		// Flyte's rule, kept: a limit map without CPU says 0 threads (Dask's "auto").
		{"memory only", corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
			base + " --nthreads 0 --memory-limit 1Gi"},
	} {
		if got := strings.Join(workerArgs(tc.res), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// taskContext is the first attempt of a Flyte template in a TaskAction of
// the golden cases' shape.
func taskContext(t *testing.T, tmpl *core.TaskTemplate) plugin.TaskContext {
	t.Helper()
	ta := flyteTaskAction(t, "rdask02", "n0", tmpl)
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	return plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: plugintest.FlyteSettings()}
}

func daskTemplate(t *testing.T, job *plugins.DaskJob) *core.TaskTemplate {
	return &core.TaskTemplate{
		Id: plugintest.TaskID("wf.t"), Type: "dask",
		Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "img:task", Args: []string{"run"},
			Resources: &core.Resources{Limits: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "2"), plugintest.Res(core.Resources_MEMORY, "4Gi")}}}},
		ExtendedResources: &core.ExtendedResources{GpuAccelerator: &core.GPUAccelerator{Device: "T4"}},
		Custom:            plugintest.Custom(t, job),
	}
}

// TestBuildReplicas: who gets which image, resources, command and restart
// policy; the job's metadata; the Service that selects the scheduler.
func TestBuildReplicas(t *testing.T) {
	tc := taskContext(t, daskTemplate(t, &plugins.DaskJob{
		Scheduler: &plugins.DaskScheduler{Image: "img:sched", Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "0"), plugintest.Res(core.Resources_MEMORY, "1Gi")}}},
		Workers: &plugins.DaskWorkerGroup{NumberOfWorkers: 3, Resources: &core.Resources{
			Limits: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "3"), plugintest.Res(core.Resources_MEMORY, "6Gi"), plugintest.Res(core.Resources_GPU, "1"), plugintest.Res(core.Resources_STORAGE, "1Gi")}}},
	}))
	spec, err := JobSpec(tc.Task)
	if err != nil {
		t.Fatal(err)
	}
	job, err := Build(tc, spec, "")
	if err != nil {
		t.Fatal(err)
	}
	runner := job.Spec.Job.Spec.Containers[0]
	sched := job.Spec.Cluster.Spec.Scheduler.Spec.Containers[0]
	worker := job.Spec.Cluster.Spec.Worker.Spec.Containers[0]
	if runner.Name != ContainerJobRunner || sched.Name != ContainerScheduler || worker.Name != ContainerWorker {
		t.Errorf("containers %s, %s, %s", runner.Name, sched.Name, worker.Name)
	}
	if runner.Image != "img:task" || sched.Image != "img:sched" || worker.Image != "img:task" {
		t.Errorf("images %s, %s, %s", runner.Image, sched.Image, worker.Image)
	}
	if strings.Join(runner.Args, " ") != "run" || strings.Join(sched.Args, " ") != "dask scheduler" {
		t.Errorf("args %q, %q", runner.Args, sched.Args)
	}
	// The scheduler's own resources (a zero CPU counts as unset), defaulted
	// by the executor's defaults, a limit copying its request.
	if q := sched.Resources.Requests[corev1.ResourceCPU]; q.String() != "1" {
		t.Errorf("scheduler CPU request %s, want the default 1", q.String())
	}
	if q := sched.Resources.Limits[corev1.ResourceMemory]; q.String() != "1Gi" {
		t.Errorf("scheduler memory limit %s, want its request", q.String())
	}
	// The workers' GPU is the accelerator's resource, as the task's would be;
	// storage is not a container resource.
	if _, ok := worker.Resources.Limits["nvidia.com/gpu"]; !ok || len(worker.Resources.Limits) != 3 {
		t.Errorf("worker limits %v, want cpu, memory and nvidia.com/gpu", worker.Resources.Limits)
	}
	if strings.Join(worker.Args, " ") != "dask worker --name $(DASK_WORKER_NAME) --nthreads 3 --memory-limit 6Gi" {
		t.Errorf("worker args %q", worker.Args)
	}
	if job.Spec.Cluster.Spec.Worker.Replicas != 3 {
		t.Errorf("replicas %d", job.Spec.Cluster.Spec.Worker.Replicas)
	}
	if job.Spec.Job.Spec.RestartPolicy != corev1.RestartPolicyNever || job.Spec.Cluster.Spec.Scheduler.Spec.RestartPolicy != corev1.RestartPolicyAlways ||
		job.Spec.Cluster.Spec.Worker.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("restart policies")
	}
	if sched.ReadinessProbe == nil || sched.ReadinessProbe.HTTPGet.Port.StrVal != "dashboard" || len(sched.Ports) != 2 {
		t.Errorf("scheduler probe %+v, ports %+v", sched.ReadinessProbe, sched.Ports)
	}
	svc := job.Spec.Cluster.Spec.Scheduler.Service
	if svc.Selector[LabelClusterName] != job.Name || svc.Selector[LabelComponent] != "scheduler" || svc.Type != corev1.ServiceTypeNodePort {
		t.Errorf("service %+v", svc)
	}
	if job.Name != "rdask02-n0-0" || job.Namespace != "flyte" || !plugin.OwnedBy(job, tc.TaskAction) {
		t.Errorf("job %s/%s owned by %+v", job.Namespace, job.Name, job.OwnerReferences)
	}
	if job.Labels[plugin.LabelManaged] != "true" {
		t.Errorf("the job's labels %v lack %s: the operator's pods would not be the executor's", job.Labels, plugin.LabelManaged)
	}
	if _, ok := job.Annotations["primary_container_name"]; ok {
		t.Errorf("annotations %v: the operator's pods have no such container", job.Annotations)
	}
	if len(job.Spec.Cluster.Labels)+len(job.Spec.Cluster.Annotations) != 0 {
		t.Errorf("cluster metadata %+v: the CRD has no such field", job.Spec.Cluster.ObjectMeta)
	}
}

// TestBuildRefusals: what cannot become a DaskJob fails the task at once.
func TestBuildRefusals(t *testing.T) {
	tc := taskContext(t, daskTemplate(t, &plugins.DaskJob{Workers: &plugins.DaskWorkerGroup{
		Resources: &core.Resources{Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_MEMORY, "1e2147483648")}}}}))
	spec, err := JobSpec(tc.Task)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(tc, spec, "")
	plugintest.WantUserFailure(t, err, CodeBadTaskSpecification, "workers.resources.requests[0]")
}

// TestDashboardPrefix: the path of the first dashboard link, without its
// /status tab; the template's own links come first, as in Flyte.
func TestDashboardPrefix(t *testing.T) {
	dash := config.TaskLogConfig{Templates: []config.TaskLogTemplate{
		{DisplayName: "logs", TemplateURIs: []string{"https://logs/{{ .generatedName }}"}},
		{DisplayName: "dash", LinkType: "dashboard", TemplateURIs: []string{"https://h/dask/{{ .namespace }}/{{ .generatedName }}/status"}},
	}}
	for _, tc := range []struct {
		name  string
		logs  config.TaskLogConfig
		links []*core.TaskLog
		want  string
	}{
		{"no dashboard link", config.DefaultTaskLogConfig(), nil, ""},
		{"a dashboard template", dash, nil, "/dask/flyte/rdask02-n0-0"},
		{"the template's link first", dash, []*core.TaskLog{{Name: "mine", Uri: "https://mine/x/{{ .runName }}"}}, "/x/rdask02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tasklog.New(tc.logs)
			if err != nil {
				t.Fatal(err)
			}
			tmpl := daskTemplate(t, &plugins.DaskJob{})
			tmpl.Metadata = &core.TaskMetadata{LogLinks: tc.links}
			ptc := taskContext(t, tmpl)
			got, err := DashboardPrefix(r, ptc)
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestLoadConfig: Flyte's default is the Kubernetes link; the section's
// keys are Flyte's; a link type the renderer does not know is refused.
func TestLoadConfig(t *testing.T) {
	c, _, err := LoadConfig(config.Config{})
	if err != nil || !c.Logs.IsKubernetesEnabled || c.Logs.KubernetesTemplateURI == "" {
		t.Errorf("default %+v, %v", c, err)
	}
	c, _, err = LoadConfig(config.Config{PluginSections: map[string]any{"dask": map[string]any{"logs": map[string]any{
		"Kubernetes-Enabled": false,
		"templates":          []any{map[string]any{"displayName": "d", "linkType": "dashboard", "templateUris": []any{"https://d/{{ .podName }}"}}},
	}}}})
	if err != nil || c.Logs.IsKubernetesEnabled || len(c.Logs.Templates) != 1 || c.Logs.Templates[0].LinkType != "dashboard" {
		t.Errorf("section: %+v, %v", c, err)
	}
	if _, _, err := LoadConfig(config.Config{PluginSections: map[string]any{"dask": map[string]any{"logs": map[string]any{
		"templates": []any{map[string]any{"linkType": "sideways"}},
	}}}}); err == nil || !strings.Contains(err.Error(), "plugins.dask.logs") {
		t.Errorf("a bad link type: %v", err)
	}
}
