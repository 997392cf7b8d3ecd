package ray

import (
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/podsecurity"
	"github.com/taskaction/executor/pkg/task"
)

// rayTask is a Flyte-form Ray TaskAction whose template is the plain
// container task edited by edit (nil: as it is).
func rayTask(t *testing.T, job *plugins.RayJob, edit func(*core.TaskTemplate)) *flytev1.TaskAction {
	t.Helper()
	tmpl := &core.TaskTemplate{
		Id: plugintest.TaskID("wf.ray"), Type: "ray",
		Target: &core.TaskTemplate_Container{Container: &core.Container{Image: rayImage, Args: []string{"a0", "--inputs", "{{.input}}"}}},
	}
	if job != nil {
		tmpl.Custom = plugintest.Custom(t, job)
	}
	if edit != nil {
		edit(tmpl)
	}
	return flyteTaskAction(t, "rbuild", "a0", "", tmpl)
}

// build builds the RayJob of ta's first attempt with the settings of a
// Flyte deployment and cfg.
func build(t *testing.T, ta *flytev1.TaskAction, cfg Config) (*rayv1.RayJob, error) {
	t.Helper()
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	return Build(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: flyteSettings()}, cfg)
}

func mustBuild(t *testing.T, ta *flytev1.TaskAction, cfg Config) *rayv1.RayJob {
	t.Helper()
	job, err := build(t, ta, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func cluster(head *plugins.HeadGroupSpec, workers ...*plugins.WorkerGroupSpec) *plugins.RayJob {
	return &plugins.RayJob{RayCluster: &plugins.RayCluster{HeadGroupSpec: head, WorkerGroupSpec: workers}}
}

func TestStartParams(t *testing.T) {
	usage := DefaultConfig()
	usage.EnableUsageStats = true
	custom := DefaultConfig()
	custom.Defaults.HeadNode.StartParameters = map[string]string{"num-cpus": "0"}
	custom.Defaults.WorkerNode = NodeConfig{StartParameters: map[string]string{"num-gpus": "1"}, IPAddress: "10.0.0.1"}
	custom.IncludeDashboard, custom.DashboardHost = false, "127.0.0.1"
	cases := []struct {
		name         string
		job          *plugins.RayJob
		cfg          Config
		head, worker map[string]string
	}{
		{name: "the task's, completed", cfg: DefaultConfig(),
			job: cluster(&plugins.HeadGroupSpec{RayStartParams: map[string]string{"num-cpus": "1", "include-dashboard": "false"}},
				&plugins.WorkerGroupSpec{GroupName: "w", Replicas: 1, RayStartParams: map[string]string{"node-ip-address": "$X"}}),
			head:   map[string]string{"num-cpus": "1", "include-dashboard": "false", "node-ip-address": "$MY_POD_IP", "dashboard-host": "0.0.0.0", "disable-usage-stats": "true"},
			worker: map[string]string{"node-ip-address": "$X", "disable-usage-stats": "true"}},
		{name: "the configured defaults when the task sets none", cfg: custom,
			job:    cluster(&plugins.HeadGroupSpec{}, &plugins.WorkerGroupSpec{GroupName: "w", Replicas: 1}),
			head:   map[string]string{"num-cpus": "0", "include-dashboard": "false", "node-ip-address": "$MY_POD_IP", "dashboard-host": "127.0.0.1", "disable-usage-stats": "true"},
			worker: map[string]string{"num-gpus": "1", "node-ip-address": "10.0.0.1", "disable-usage-stats": "true"}},
		{name: "usage statistics allowed", cfg: usage,
			job:    cluster(nil, &plugins.WorkerGroupSpec{GroupName: "w", Replicas: 1}),
			head:   map[string]string{"include-dashboard": "true", "node-ip-address": "$MY_POD_IP", "dashboard-host": "0.0.0.0", "disable-usage-stats": "true"},
			worker: map[string]string{"node-ip-address": "$MY_POD_IP", "disable-usage-stats": "true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job := mustBuild(t, rayTask(t, tc.job, nil), tc.cfg)
			cs := job.Spec.RayClusterSpec
			if !reflect.DeepEqual(cs.HeadGroupSpec.RayStartParams, tc.head) {
				t.Errorf("head params = %v, want %v", cs.HeadGroupSpec.RayStartParams, tc.head)
			}
			if !reflect.DeepEqual(cs.WorkerGroupSpecs[0].RayStartParams, tc.worker) {
				t.Errorf("worker params = %v, want %v", cs.WorkerGroupSpecs[0].RayStartParams, tc.worker)
			}
		})
	}
}

// TestUsageStatsDefault: with usage statistics allowed, the configured
// default parameters still apply, and no disable flag is added to a task's own.
func TestUsageStatsDefault(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EnableUsageStats = true
	job := mustBuild(t, rayTask(t, cluster(&plugins.HeadGroupSpec{RayStartParams: map[string]string{"num-cpus": "1"}}), nil), cfg)
	if _, ok := job.Spec.RayClusterSpec.HeadGroupSpec.RayStartParams["disable-usage-stats"]; ok {
		t.Errorf("head params = %v: disable-usage-stats added although usage statistics are allowed", job.Spec.RayClusterSpec.HeadGroupSpec.RayStartParams)
	}
}

func TestReplicas(t *testing.T) {
	cases := []struct{ replicas, minR, maxR, wantMin, wantMax int32 }{
		{2, 1, 4, 1, 4},
		{2, 3, 1, 2, 2}, // bounds that exclude replicas are widened to it
		{1, 0, 0, 0, 1},
		{0, 0, 0, 0, 0},
	}
	for _, tc := range cases {
		job := mustBuild(t, rayTask(t, cluster(nil, &plugins.WorkerGroupSpec{GroupName: "w", Replicas: tc.replicas, MinReplicas: tc.minR, MaxReplicas: tc.maxR}), nil), DefaultConfig())
		g := job.Spec.RayClusterSpec.WorkerGroupSpecs[0]
		if *g.Replicas != tc.replicas || *g.MinReplicas != tc.wantMin || *g.MaxReplicas != tc.wantMax {
			t.Errorf("replicas %d min %d max %d: got %d [%d, %d], want [%d, %d]", tc.replicas, tc.minR, tc.maxR,
				*g.Replicas, *g.MinReplicas, *g.MaxReplicas, tc.wantMin, tc.wantMax)
		}
	}
}

func TestShutdownAndSubmission(t *testing.T) {
	noShutdown := DefaultConfig()
	noShutdown.ShutdownAfterJobFinishes, noShutdown.TTLSecondsAfterFinished = false, 0
	httpMode, sidecar := DefaultConfig(), DefaultConfig()
	httpMode.SubmissionMode, sidecar.SubmissionMode = "HTTPMode", "SidecarMode"
	cases := []struct {
		name      string
		job       *plugins.RayJob
		cfg       Config
		shutdown  bool
		ttl       int32
		mode      rayv1.JobSubmissionMode
		submitter bool
	}{
		{"configured", cluster(nil), DefaultConfig(), true, 3600, rayv1.K8sJobMode, true},
		{"the task's", &plugins.RayJob{ShutdownAfterJobFinishes: true, TtlSecondsAfterFinished: 60}, noShutdown, true, 60, rayv1.K8sJobMode, true},
		{"the task's zero ttl", &plugins.RayJob{ShutdownAfterJobFinishes: true}, DefaultConfig(), true, 0, rayv1.K8sJobMode, true},
		{"not shut down", cluster(nil), noShutdown, false, 0, rayv1.K8sJobMode, true},
		{"http mode: no submitter", cluster(nil), httpMode, true, 3600, rayv1.HTTPMode, false},
		{"sidecar mode: no submitter", cluster(nil), sidecar, true, 3600, rayv1.SidecarMode, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustBuild(t, rayTask(t, tc.job, nil), tc.cfg).Spec
			if s.ShutdownAfterJobFinishes != tc.shutdown || s.TTLSecondsAfterFinished != tc.ttl || s.SubmissionMode != tc.mode ||
				(s.SubmitterPodTemplate != nil) != tc.submitter {
				t.Errorf("shutdown %v ttl %d mode %s submitter %v", s.ShutdownAfterJobFinishes, s.TTLSecondsAfterFinished, s.SubmissionMode, s.SubmitterPodTemplate != nil)
			}
		})
	}
}

func TestRuntimeEnv(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	cases := []struct {
		name    string
		job     *plugins.RayJob
		want    string
		badSpec bool
	}{
		{name: "yaml", job: &plugins.RayJob{RuntimeEnvYaml: "pip: [numpy]\n"}, want: "pip: [numpy]\n"},
		{name: "yaml wins", job: &plugins.RayJob{RuntimeEnvYaml: "a: 1\n", RuntimeEnv: b64(`{"b":2}`)}, want: "a: 1\n"},
		{name: "deprecated base64 JSON, as YAML", job: &plugins.RayJob{RuntimeEnv: b64(`{"pip":["numpy","pandas"],"env_vars":{"A":"1"},"count":3}`)},
			want: "count: 3\nenv_vars:\n  A: \"1\"\npip:\n- numpy\n- pandas\n"},
		{name: "none", job: &plugins.RayJob{}, want: ""},
		{name: "not base64", job: &plugins.RayJob{RuntimeEnv: "%%%"}, badSpec: true},
		{name: "not JSON", job: &plugins.RayJob{RuntimeEnv: b64("pip: x")}, badSpec: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			job, err := build(t, rayTask(t, tc.job, nil), DefaultConfig())
			if tc.badSpec {
				plugintest.WantUserFailure(t, err, CodeBadTaskSpecification, "runtime_env")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if job.Spec.RuntimeEnvYAML != tc.want {
				t.Errorf("runtimeEnvYAML = %q, want %q", job.Spec.RuntimeEnvYAML, tc.want)
			}
		})
	}
}

func TestBadTaskSpecification(t *testing.T) {
	notAJob := &structpb.Struct{Fields: map[string]*structpb.Value{"rayCluster": structpb.NewStringValue("big")}}
	badOverlay := plugintest.Struct(t, map[string]any{"containers": []any{map[string]any{"name": "ray-head", "colour": "blue"}}})
	cases := []struct {
		name    string
		edit    func(*core.TaskTemplate)
		job     *plugins.RayJob
		mention string
	}{
		{name: "no custom", mention: "custom"},
		{name: "custom not a RayJob", edit: func(tm *core.TaskTemplate) { tm.Custom = notAJob }, mention: "flyteidl2.plugins.RayJob"},
		{name: "group pod spec with an unknown field", job: cluster(&plugins.HeadGroupSpec{K8SPod: &core.K8SPod{PodSpec: badOverlay}}), mention: "colour"},
		{name: "bad autoscaler quantity", job: &plugins.RayJob{RayCluster: &plugins.RayCluster{AutoscalerOptions: &plugins.AutoscalerOptions{
			Resources: &core.Resources{Limits: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "1e999999")}}}}}, mention: "autoscaler_options"},
		{name: "bad group shared memory", job: cluster(nil, &plugins.WorkerGroupSpec{GroupName: "w", ExtendedResources: &core.ExtendedResources{
			SharedMemory: &core.SharedMemory{MountName: "shm", MountPath: "/dev/shm", SizeLimit: "lots"}}}), mention: "size_limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(t, rayTask(t, tc.job, tc.edit), DefaultConfig())
			plugintest.WantUserFailure(t, err, CodeBadTaskSpecification, tc.mention)
		})
	}
}

// TestTypedForm: a typed TaskAction carries its RayJob as JSON in
// spec.template.config.rayJob; without it, the cluster is a head alone.
func TestTypedForm(t *testing.T) {
	typed := func(config map[string]string) *flytev1.TaskAction {
		return &flytev1.TaskAction{
			ObjectMeta: metav1.ObjectMeta{Name: "typed", Namespace: "ns", UID: "u1"},
			Spec: flytev1.TaskActionSpec{RunName: "r", Project: "p", Domain: "d", ActionName: "typed", TaskType: "ray",
				InputURI: "s3://b/r/typed/inputs.pb", RunOutputBase: "s3://b/r",
				Template: &flytev1.TypedTaskTemplate{ID: flytev1.TaskID{Name: "t", Version: "1"}, Config: config,
					Container: &flytev1.Container{Image: rayImage, Command: []string{"python"}, Args: []string{"main.py", "--epochs", "3"}}}},
		}
	}
	job := mustBuild(t, typed(map[string]string{ConfigKey: `{"rayCluster": {"workerGroupSpec": [{"groupName": "w", "replicas": 2}]}, "runtimeEnvYaml": "pip: [x]"}`}), DefaultConfig())
	if n := len(job.Spec.RayClusterSpec.WorkerGroupSpecs); n != 1 || *job.Spec.RayClusterSpec.WorkerGroupSpecs[0].Replicas != 2 || job.Spec.RuntimeEnvYAML != "pip: [x]" {
		t.Errorf("typed RayJob = %+v", job.Spec)
	}
	if job.Spec.Entrypoint != "python main.py --epochs 3" {
		t.Errorf("entrypoint = %q: want the container's command and arguments", job.Spec.Entrypoint)
	}
	for _, c := range []corev1.Container{job.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0], job.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0]} {
		if c.Command != nil || c.Args != nil {
			t.Errorf("%s: command %v, args %v; want neither (KubeRay would run them before ray start)", c.Name, c.Command, c.Args)
		}
	}
	headOnly := mustBuild(t, typed(nil), DefaultConfig())
	if len(headOnly.Spec.RayClusterSpec.WorkerGroupSpecs) != 0 {
		t.Errorf("without %s: %d worker groups, want none", ConfigKey, len(headOnly.Spec.RayClusterSpec.WorkerGroupSpecs))
	}
	_, err := build(t, typed(map[string]string{ConfigKey: `{"rayClustr": {}}`}), DefaultConfig())
	plugintest.WantUserFailure(t, err, CodeBadTaskSpecification, "spec.template.config.rayJob")
}

func TestServiceAccount(t *testing.T) {
	withRunAs := func(tm *core.TaskTemplate) {
		tm.SecurityContext = &core.SecurityContext{RunAs: &core.Identity{K8SServiceAccount: "runner"}}
	}
	cfg := DefaultConfig()
	cfg.ServiceAccount = "ray-default"
	cases := []struct {
		name     string
		edit     func(*core.TaskTemplate)
		executor string
		want     string
	}{
		{"the task's runAs", withRunAs, "exec-default", "runner"},
		{"the executor's default", nil, "exec-default", "exec-default"},
		{"plugins.ray.serviceAccount", nil, "", "ray-default"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := rayTask(t, cluster(nil, &plugins.WorkerGroupSpec{GroupName: "w", Replicas: 1}), tc.edit)
			tk, err := task.FromTaskAction(ta)
			if err != nil {
				t.Fatal(err)
			}
			s := flyteSettings()
			s.DefaultServiceAccount = tc.executor
			job, err := Build(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: s}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			cs := job.Spec.RayClusterSpec
			if h, w := cs.HeadGroupSpec.Template.Spec.ServiceAccountName, cs.WorkerGroupSpecs[0].Template.Spec.ServiceAccountName; h != tc.want || w != tc.want {
				t.Errorf("head %q, worker %q, want %q", h, w, tc.want)
			}
			if sa := job.Spec.SubmitterPodTemplate.Spec.ServiceAccountName; sa != "" {
				t.Errorf("submitter runs as %q, want the namespace's default", sa)
			}
		})
	}
}

// TestLogsSidecar: the configured sidecar joins the head pod with Ray's log
// directory read-only: the head's own mount at /tmp/ray, or a new emptyDir.
func TestLogsSidecar(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LogsSidecar = &corev1.Container{Name: "shipper", Image: "fluent/fluent-bit:3.0",
		VolumeMounts: []corev1.VolumeMount{{Name: "old", MountPath: "/tmp/ray"}, {Name: "conf", MountPath: "/etc/fluent"}}}

	job := mustBuild(t, rayTask(t, cluster(nil, &plugins.WorkerGroupSpec{GroupName: "w", Replicas: 1}), nil), cfg)
	head := job.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec
	if n := len(head.Containers); n != 2 || head.Containers[1].Name != "shipper" {
		t.Fatalf("head containers = %d, want ray-head and the sidecar", n)
	}
	wantVol := corev1.Volume{Name: "system-ray-state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	if len(head.Volumes) != 1 || !reflect.DeepEqual(head.Volumes[0], wantVol) {
		t.Errorf("volumes = %+v", head.Volumes)
	}
	if m := head.Containers[0].VolumeMounts; len(m) != 1 || !reflect.DeepEqual(m[0], corev1.VolumeMount{Name: "system-ray-state", MountPath: "/tmp/ray"}) {
		t.Errorf("ray-head mounts = %+v", m)
	}
	if m := head.Containers[1].VolumeMounts; len(m) != 2 || !reflect.DeepEqual(m[0], corev1.VolumeMount{Name: "system-ray-state", MountPath: "/tmp/ray", ReadOnly: true}) || m[1].Name != "conf" {
		t.Errorf("sidecar mounts = %+v", m)
	}
	if cfg.LogsSidecar.VolumeMounts[0].Name != "old" {
		t.Error("the configured sidecar was modified")
	}
	if n := len(job.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers); n != 1 {
		t.Errorf("workers have %d containers: the sidecar is the head's only", n)
	}

	// A head that mounts its own volume at /tmp/ray shares that one.
	podTask := rayTask(t, cluster(nil), func(tm *core.TaskTemplate) {
		tm.Config = map[string]string{"primary_container_name": "main"}
		tm.Target = &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PodSpec: plugintest.Struct(t, map[string]any{
			"containers": []any{map[string]any{"name": "main", "image": rayImage, "volumeMounts": []any{map[string]any{"name": "logs", "mountPath": "/tmp/ray"}}}},
			"volumes":    []any{map[string]any{"name": "logs", "emptyDir": map[string]any{}}},
		})}}
	})
	head = mustBuild(t, podTask, cfg).Spec.RayClusterSpec.HeadGroupSpec.Template.Spec
	if len(head.Volumes) != 1 || head.Volumes[0].Name != "logs" {
		t.Errorf("volumes = %+v, want the head's own only", head.Volumes)
	}
	if m := head.Containers[1].VolumeMounts[0]; !reflect.DeepEqual(m, corev1.VolumeMount{Name: "logs", MountPath: "/tmp/ray", ReadOnly: true}) {
		t.Errorf("sidecar mount = %+v", m)
	}
}

// TestGroupMetadata: a group's pod metadata joins its pods' and cannot
// replace the executor's labels, the primary container's annotation or the
// secret requests.
func TestGroupMetadata(t *testing.T) {
	job := mustBuild(t, rayTask(t, cluster(&plugins.HeadGroupSpec{K8SPod: &core.K8SPod{Metadata: &core.K8SObjectMetadata{
		Labels:      map[string]string{"team": "ml", "project": "other", "flyte.org/managed": "false"},
		Annotations: map[string]string{"note": "head", "flyte.secrets/s0": "x", "primary_container_name": "x"},
	}}}), func(tm *core.TaskTemplate) {
		tm.SecurityContext = &core.SecurityContext{Secrets: []*core.Secret{{Group: "g", Key: "k"}}}
	}), DefaultConfig())
	m := job.Spec.RayClusterSpec.HeadGroupSpec.Template.ObjectMeta
	if m.Labels["team"] != "ml" || m.Labels["project"] != "flytesnacks" || m.Labels["flyte.org/managed"] != "true" || m.Labels["inject-flyte-secrets"] != "true" {
		t.Errorf("labels = %v", m.Labels)
	}
	if m.Annotations["note"] != "head" || m.Annotations["flyte.secrets/s0"] == "x" || m.Annotations["flyte.secrets/s0"] == "" {
		t.Errorf("annotations = %v", m.Annotations)
	}
	if _, ok := m.Annotations["primary_container_name"]; ok {
		t.Errorf("annotations = %v: the task's container is ray-head here", m.Annotations)
	}
	if _, ok := job.Annotations["primary_container_name"]; ok {
		t.Errorf("RayJob annotations = %v", job.Annotations)
	}
	sub := job.Spec.SubmitterPodTemplate.ObjectMeta
	if sub.Labels["team"] == "ml" || sub.Labels["flyte.org/managed"] != "true" || sub.Annotations["flyte.secrets/s0"] != m.Annotations["flyte.secrets/s0"] {
		t.Errorf("submitter metadata = %+v", sub)
	}
}

// TestPodSecurity: the head and worker pods, as finally built, are held to
// the executor's pod-security policy.
func TestPodSecurity(t *testing.T) {
	pol, err := podsecurity.New("baseline", nil)
	if err != nil {
		t.Fatal(err)
	}
	privileged := plugintest.Struct(t, map[string]any{"containers": []any{map[string]any{"name": "ray-worker", "securityContext": map[string]any{"privileged": true}}}})
	ta := rayTask(t, cluster(nil, &plugins.WorkerGroupSpec{GroupName: "w", Replicas: 1, K8SPod: &core.K8SPod{PodSpec: privileged}}), nil)
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	s := flyteSettings()
	s.PodSecurity = pol
	_, err = Build(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: s}, DefaultConfig())
	var le *plugin.LaunchError
	if !errors.As(err, &le) || le.Err.Code != CodePodSecurityViolation || !strings.Contains(le.Err.Message, "privileged") {
		t.Fatalf("error = %v, want %s naming privileged", err, CodePodSecurityViolation)
	}
	ok := rayTask(t, cluster(nil, &plugins.WorkerGroupSpec{GroupName: "w", Replicas: 1}), nil)
	if tk, err = task.FromTaskAction(ok); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(plugin.TaskContext{TaskAction: ok, Task: tk, Attempt: 1, Settings: s}, DefaultConfig()); err != nil {
		t.Errorf("a plain Ray task: %v", err)
	}
}

// TestRayContainerFirst: KubeRay takes the first container for Ray's, so the
// task's container comes first, whatever its place in the task's pod.
func TestRayContainerFirst(t *testing.T) {
	ta := rayTask(t, cluster(nil, &plugins.WorkerGroupSpec{GroupName: "w", Replicas: 1}), func(tm *core.TaskTemplate) {
		tm.Config = map[string]string{"primary_container_name": "main"}
		tm.Target = &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PodSpec: plugintest.Struct(t, map[string]any{"containers": []any{
			map[string]any{"name": "a", "image": "busybox"}, map[string]any{"name": "b", "image": "busybox"},
			map[string]any{"name": "main", "image": rayImage, "args": []any{"x"}}}})}}
	})
	job := mustBuild(t, ta, DefaultConfig())
	names := func(cs []corev1.Container) string {
		var n []string
		for _, c := range cs {
			n = append(n, c.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(job.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers); got != "ray-head,a,b" {
		t.Errorf("head containers = %s", got)
	}
	if got := names(job.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers); got != "ray-worker,a,b" {
		t.Errorf("worker containers = %s", got)
	}
	if img := job.Spec.SubmitterPodTemplate.Spec.Containers[0].Image; img != rayImage {
		t.Errorf("submitter image = %s, want the Ray container's", img)
	}
	if job.Spec.Entrypoint != "x" {
		t.Errorf("entrypoint = %q", job.Spec.Entrypoint)
	}
}

// TestGroupAccelerator: a worker group with an accelerator of its own, whose
// GPU its pod spec asks for, is placed on that accelerator; the head, which
// asks for none, is not.
func TestGroupAccelerator(t *testing.T) {
	gpuPod := plugintest.Struct(t, map[string]any{"containers": []any{map[string]any{"name": "ray-worker",
		"resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": "2"}}}}})
	ta := rayTask(t, cluster(nil, &plugins.WorkerGroupSpec{GroupName: "gpu", Replicas: 1, K8SPod: &core.K8SPod{PodSpec: gpuPod},
		ExtendedResources: &core.ExtendedResources{GpuAccelerator: &core.GPUAccelerator{Device: "T4"}}}), nil)
	job := mustBuild(t, ta, DefaultConfig())
	w := job.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec
	if q := w.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.Cmp(resource.MustParse("2")) != 0 {
		t.Errorf("worker GPU limit = %v", q.String())
	}
	terms := w.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != "nvidia-tesla-t4" {
		t.Errorf("worker affinity = %+v", w.Affinity)
	}
	if h := job.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Affinity; h.NodeAffinity != nil {
		t.Errorf("head affinity = %+v, want none", h)
	}
}

// TestInterruptibleAfterOverlay: a group's own node selector terms get the
// interruptible requirement too.
func TestInterruptibleAfterOverlay(t *testing.T) {
	overlay := plugintest.Struct(t, map[string]any{"affinity": map[string]any{"nodeAffinity": map[string]any{
		"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": []any{
			map[string]any{"matchExpressions": []any{map[string]any{"key": "zone", "operator": "In", "values": []any{"a"}}}}}}}}})
	ta := rayTask(t, cluster(&plugins.HeadGroupSpec{K8SPod: &core.K8SPod{PodSpec: overlay}}), nil)
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	s := flyteSettings()
	s.NonInterruptibleNodeSelectorRequirement = &corev1.NodeSelectorRequirement{Key: "spot", Operator: corev1.NodeSelectorOpDoesNotExist}
	job, err := Build(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: s}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	terms := job.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 {
		t.Fatalf("terms = %+v, want the task's and the group's", terms)
	}
	for i, term := range terms {
		last := term.MatchExpressions[len(term.MatchExpressions)-1]
		if last.Key != "spot" {
			t.Errorf("term %d = %+v lacks the non-interruptible requirement", i, term)
		}
	}
}

// TestAutoscalerOptions: only what the task sets, with Flyte's names.
func TestAutoscalerOptions(t *testing.T) {
	job := mustBuild(t, rayTask(t, &plugins.RayJob{RayCluster: &plugins.RayCluster{EnableAutoscaling: true,
		AutoscalerOptions: &plugins.AutoscalerOptions{UpscalingMode: plugins.AutoscalerOptions_UPSCALING_MODE_CONSERVATIVE,
			Resources: &core.Resources{Limits: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_GPU, "1"), plugintest.Res(core.Resources_CPU, "0")}}}}}, nil), DefaultConfig())
	o := job.Spec.RayClusterSpec.AutoscalerOptions
	if o == nil || *o.UpscalingMode != "Conservative" || o.IdleTimeoutSeconds != nil || o.Image != nil || o.Env != nil {
		t.Fatalf("options = %+v", o)
	}
	if _, ok := o.Resources.Limits["gpu"]; !ok || len(o.Resources.Limits) != 1 {
		t.Errorf("resources = %+v", o.Resources)
	}
	if !*job.Spec.RayClusterSpec.EnableInTreeAutoscaling {
		t.Error("autoscaling off")
	}
	none := mustBuild(t, rayTask(t, cluster(nil), nil), DefaultConfig())
	if none.Spec.RayClusterSpec.AutoscalerOptions != nil || *none.Spec.RayClusterSpec.EnableInTreeAutoscaling {
		t.Errorf("without options: %+v", none.Spec.RayClusterSpec)
	}
}

// TestBuildIsPure: building twice gives the same object and leaves the
// TaskAction and the configuration as they were.
func TestBuildIsPure(t *testing.T) {
	ta := rayTask(t, cluster(&plugins.HeadGroupSpec{RayStartParams: map[string]string{"a": "1"}}, &plugins.WorkerGroupSpec{GroupName: "w", Replicas: 1}), nil)
	before := ta.DeepCopy()
	cfg := DefaultConfig()
	a, b := mustBuild(t, ta, cfg), mustBuild(t, ta, cfg)
	if !reflect.DeepEqual(a, b) {
		t.Error("two builds differ")
	}
	if !reflect.DeepEqual(ta, before) {
		t.Error("the TaskAction was modified")
	}
	if !reflect.DeepEqual(cfg, DefaultConfig()) {
		t.Errorf("the configuration was modified: %+v", cfg.Defaults)
	}
}

// TestFlyteCommand: in Flyte's form the entrypoint is the task container's
// arguments only, and a command stays on the Ray containers (KubeRay runs it
// before ray start), as Flyte builds it.
func TestFlyteCommand(t *testing.T) {
	job := mustBuild(t, rayTask(t, cluster(nil, &plugins.WorkerGroupSpec{GroupName: "w", Replicas: 1}), func(tm *core.TaskTemplate) {
		tm.GetContainer().Command = []string{"uv", "run"}
	}), DefaultConfig())
	if job.Spec.Entrypoint != "a0 --inputs s3://flyte-data/flytesnacks/development/rbuild/a0/inputs.pb" {
		t.Errorf("entrypoint %q", job.Spec.Entrypoint)
	}
	for _, c := range []corev1.Container{job.Spec.RayClusterSpec.HeadGroupSpec.Template.Spec.Containers[0], job.Spec.RayClusterSpec.WorkerGroupSpecs[0].Template.Spec.Containers[0]} {
		if strings.Join(c.Command, " ") != "uv run" || c.Args != nil {
			t.Errorf("%s: command %v, args %v", c.Name, c.Command, c.Args)
		}
	}
}
