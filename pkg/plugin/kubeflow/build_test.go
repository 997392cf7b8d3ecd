package kubeflow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/task"
)

// flyteTC is the first attempt of the golden TaskAction running the template
// given as protojson.
func flyteTC(t *testing.T, tmplJSON string) plugin.TaskContext {
	t.Helper()
	tmpl := &core.TaskTemplate{}
	if err := protojson.Unmarshal([]byte(tmplJSON), tmpl); err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", "taskaction.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ta := &flytev1.TaskAction{}
	if err := yaml.Unmarshal(raw, ta); err != nil {
		t.Fatal(err)
	}
	ta.Spec.TaskTemplate, ta.Spec.TaskType = b, tmpl.GetType()
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	return plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: plugintest.FlyteSettings()}
}

func build(t *testing.T, tc plugin.TaskContext) (any, error) {
	t.Helper()
	p, err := NewPlugin(tc.Task.Type, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return p.Build(tc)
}

const containerTarget = `"container": {"image": "img:1", "args": ["run", "{{.input}}"], "resources": {"requests": [{"name": "CPU", "value": "2"}, {"name": "MEMORY", "value": "4Gi"}]}}`

// TestBuildRefusals: tasks Flyte's plugins cannot turn into a job fail with
// BadTaskSpecification, a permanent user error (Flyte returns some of them
// as plain errors, retried as system failures for ever).
func TestBuildRefusals(t *testing.T) {
	for _, tc := range []struct{ name, tmpl, want string }{
		{"no custom", `{"type": "pytorch", ` + containerTarget + `}`, "custom part, which is empty"},
		{"no workers (v0)", `{"type": "pytorch", "custom": {"workers": 0}, ` + containerTarget + `}`, "at least one worker"},
		{"no workers (v1)", `{"type": "pytorch", "taskTypeVersion": 1, "custom": {"masterReplicas": {"common": {"replicas": 1}}}, ` + containerTarget + `}`, "at least one worker"},
		{"negative workers", `{"type": "mpi", "taskTypeVersion": 1, "custom": {"workerReplicas": {"common": {"replicas": -2}}}, ` + containerTarget + `}`, "at least one worker"},
		{"TF without workers", `{"type": "tensorflow", "custom": {"psReplicas": 1}, ` + containerTarget + `}`, "at least one worker"},
		{"unknown version", `{"type": "tensorflow", "taskTypeVersion": 2, "custom": {"workers": 1}, ` + containerTarget + `}`, "no task type version 2"},
		{"not the message", `{"type": "pytorch", "custom": {"workers": "many"}, ` + containerTarget + `}`, "flyteidl2.plugins.DistributedPyTorchTrainingTask"},
		{"unknown restart policy", `{"type": "pytorch", "taskTypeVersion": 1, "custom": {"workerReplicas": {"common": {"replicas": 1, "restartPolicy": 7}}}, ` + containerTarget + `}`, "unknown restart policy 7"},
		{"unknown clean pod policy", `{"type": "tensorflow", "taskTypeVersion": 1, "custom": {"workerReplicas": {"replicas": 1}, "runPolicy": {"cleanPodPolicy": 9}}, ` + containerTarget + `}`, "unknown clean pod policy 9"},
		{"bad replica quantity", `{"type": "mpi", "taskTypeVersion": 1, "custom": {"workerReplicas": {"common": {"replicas": 1, "resources": {"limits": [{"name": "CPU", "value": "1e2147483648"}]}}}}, ` + containerTarget + `}`, "replica resources limits[0] (CPU)"},
		{"a container already named as the operator's", `{"type": "pytorch", "custom": {"workers": 1}, "config": {"primary_container_name": "main"},
			"k8sPod": {"podSpec": {"containers": [{"name": "main", "image": "a"}, {"name": "pytorch", "image": "b"}]}}}`, `container named "pytorch" besides the primary container "main"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(t, flyteTC(t, tc.tmpl))
			var le *plugin.LaunchError
			if !errors.As(err, &le) || le.Retryable || le.Err.Code != CodeBadTaskSpecification || le.Err.Kind != flytev1.ErrorKindUser {
				t.Fatalf("err %v; want a permanent BadTaskSpecification", err)
			}
			if !strings.Contains(le.Err.Message, tc.want) {
				t.Errorf("message %q; want it to contain %q", le.Err.Message, tc.want)
			}
		})
	}
}

// TestReplicaOverrides: a group's image, resources and (MPI) command change
// only the primary container of its pods, of a pod-spec task too, and the
// container is renamed to the one the operator runs.
func TestReplicaOverrides(t *testing.T) {
	tc := flyteTC(t, `{"type": "mpi", "taskTypeVersion": 1, "config": {"primary_container_name": "main"},
		"custom": {"workerReplicas": {"common": {"replicas": 2, "image": "img:worker", "resources": {"requests": [{"name": "GPU", "value": "1"}]}},
			"command": ["sshd", "-De"]}, "slots": 4},
		"k8sPod": {"podSpec": {"containers": [
			{"name": "main", "image": "img:1", "command": ["python"], "args": ["-m", "train", "{{.input}}"], "resources": {"requests": {"cpu": "2", "memory": "8Gi", "ephemeral-storage": "10Gi"}}},
			{"name": "proxy", "image": "envoy:1", "args": ["--in", "{{.input}}"]}]}}}`)
	obj, err := build(t, tc)
	if err != nil {
		t.Fatal(err)
	}
	j := obj.(*kubeflowv1.MPIJob)
	if *j.Spec.SlotsPerWorker != 4 {
		t.Errorf("slots %d; want the task's 4", *j.Spec.SlotsPerWorker)
	}
	launcher, worker := j.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeLauncher], j.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeWorker]
	if *launcher.Replicas != 1 || *worker.Replicas != 2 {
		t.Errorf("replicas %d and %d; want 1 launcher and 2 workers", *launcher.Replicas, *worker.Replicas)
	}
	lc, wc := launcher.Template.Spec.Containers, worker.Template.Spec.Containers
	if lc[0].Name != "mpi" || wc[0].Name != "mpi" || lc[1].Name != "proxy" || wc[1].Name != "proxy" {
		t.Fatalf("containers %s, %s and %s, %s; want the primary renamed mpi, the other kept", lc[0].Name, lc[1].Name, wc[0].Name, wc[1].Name)
	}
	if lc[0].Image != "img:1" || strings.Join(lc[0].Args, " ") != "-m train s3://flyte-data/flytesnacks/development/rkf12ab/a0/inputs.pb" {
		t.Errorf("launcher %s %v; want the task's image and rendered args", lc[0].Image, lc[0].Args)
	}
	if wc[0].Image != "img:worker" || strings.Join(wc[0].Command, " ") != "python" || strings.Join(wc[0].Args, " ") != "sshd -De" {
		t.Errorf("worker %s %v %v; want the group's image, the task's command and the group's command as args (Flyte's)", wc[0].Image, wc[0].Command, wc[0].Args)
	}
	if wc[1].Image != "envoy:1" || strings.Join(wc[1].Args, " ") != "--in s3://flyte-data/flytesnacks/development/rkf12ab/a0/inputs.pb" {
		t.Errorf("the other container %s %v; want it as the task has it", wc[1].Image, wc[1].Args)
	}
	// The group's resources, completed by the defaults, replace the task's
	// of the same name; the others stay.
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
		"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceEphemeralStorage: resource.MustParse("10Gi")}
	if got := wc[0].Resources.Requests; !equalResources(got, want) {
		t.Errorf("worker requests %v; want %v", got, want)
	}
	if got := lc[0].Resources.Requests; got.Cpu().String() != "2" || got.Memory().String() != "8Gi" {
		t.Errorf("launcher requests %v; want the task's", got)
	}
	for _, c := range []*kubeflowv1.ReplicaSpec{launcher, worker} {
		if _, ok := c.Template.Annotations[container.AnnotationPrimaryContainer]; ok {
			t.Errorf("the template names a primary container: %v", c.Template.Annotations)
		}
	}
	if j.Labels["flyte.org/managed"] != "true" || j.Labels["attempt"] != "1" {
		t.Errorf("job labels %v; want the executor's", j.Labels)
	}
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// TestReplicaResources: Flyte's completion of a group's resources.
func TestReplicaResources(t *testing.T) {
	entry := func(n core.Resources_ResourceName, v string) *core.Resources_ResourceEntry {
		return &core.Resources_ResourceEntry{Name: n, Value: v}
	}
	s := plugin.Settings{DefaultCPU: "500m", DefaultMemory: "1Gi"}
	for _, tc := range []struct {
		name     string
		in       *core.Resources
		req, lim string
	}{
		{"empty: the defaults", &core.Resources{}, "cpu=500m memory=1Gi", "cpu=500m memory=1Gi"},
		{"limits only: requests take them", &core.Resources{Limits: []*core.Resources_ResourceEntry{entry(core.Resources_CPU, "4"), entry(core.Resources_GPU, "2")}},
			"cpu=4 gpu=2 memory=1Gi", "cpu=4 gpu=2 memory=1Gi"},
		{"a request above its limit is lowered", &core.Resources{Requests: []*core.Resources_ResourceEntry{entry(core.Resources_MEMORY, "8Gi")},
			Limits: []*core.Resources_ResourceEntry{entry(core.Resources_MEMORY, "4Gi")}}, "cpu=500m memory=4Gi", "cpu=500m memory=4Gi"},
		{"zero is unset; other kinds ignored", &core.Resources{Requests: []*core.Resources_ResourceEntry{entry(core.Resources_CPU, "0"), entry(core.Resources_STORAGE, "1Ti"),
			entry(core.Resources_EPHEMERAL_STORAGE, "20Gi")}}, "cpu=500m ephemeral-storage=20Gi memory=1Gi", "cpu=500m ephemeral-storage=20Gi memory=1Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := replicaResources(tc.in, s)
			if err != nil {
				t.Fatal(err)
			}
			if got := listString(r.Requests); got != tc.req {
				t.Errorf("requests %s; want %s", got, tc.req)
			}
			if got := listString(r.Limits); got != tc.lim {
				t.Errorf("limits %s; want %s", got, tc.lim)
			}
		})
	}
}

func listString(l corev1.ResourceList) string {
	var out []string
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceEphemeralStorage, task.ResourceGPU, corev1.ResourceMemory} {
		if q, ok := l[n]; ok {
			out = append(out, string(n)+"="+q.String())
		}
	}
	return strings.Join(out, " ")
}

// TestTypedForm: a typed TaskAction gives its custom part as JSON in
// spec.template.config.custom (version 1 unless taskTypeVersion says 0).
func TestTypedForm(t *testing.T) {
	ta := &flytev1.TaskAction{}
	ta.Name, ta.Namespace, ta.UID = "train", "ns", "uid-1"
	ta.Spec = flytev1.TaskActionSpec{RunName: "r1", Project: "p", Domain: "d", ActionName: "a0", TaskType: PyTorch,
		InputURI: "s3://b/in", RunOutputBase: "s3://b/out",
		Template: &flytev1.TypedTaskTemplate{ID: flytev1.TaskID{Name: "t", Version: "v1"},
			Container: &flytev1.Container{Image: "torch:1", Args: []string{"train"}},
			Config:    map[string]string{ConfigCustom: `{"workerReplicas": {"common": {"replicas": 3}}, "masterReplicas": {"common": {"replicas": 5}}}`}}}
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	tc := plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 2, Settings: plugintest.FlyteSettings()}
	obj, err := build(t, tc)
	if err != nil {
		t.Fatal(err)
	}
	j := obj.(*kubeflowv1.PyTorchJob)
	if j.Name != "train-1" || *j.Spec.PyTorchReplicaSpecs["Worker"].Replicas != 3 || *j.Spec.PyTorchReplicaSpecs["Master"].Replicas != 1 {
		t.Errorf("job %s, replicas %d and %d; want train-1, 3 workers and one master", j.Name,
			*j.Spec.PyTorchReplicaSpecs["Worker"].Replicas, *j.Spec.PyTorchReplicaSpecs["Master"].Replicas)
	}
	tk.Config = map[string]string{ConfigCustom: `{"workers": 2}`, ConfigTaskTypeVersion: "0"}
	if obj, err = build(t, tc); err != nil || *obj.(*kubeflowv1.PyTorchJob).Spec.PyTorchReplicaSpecs["Worker"].Replicas != 2 {
		t.Errorf("version 0: %v", err)
	}
	tk.Config = nil
	if _, err := build(t, tc); err == nil || !strings.Contains(err.Error(), "spec.template.config.custom is required") {
		t.Errorf("no custom: %v", err)
	}
}

// TestJobName: the job is named as its pod would be when that name is one
// the operator takes and leaves room for its replicas' names.
func TestJobName(t *testing.T) {
	long := strings.Repeat("abcdefghij", 6) // 60 characters
	for _, tc := range []struct {
		ta      string
		attempt int32
		want    string
	}{
		{"rkf12ab-a0", 1, "rkf12ab-a0-0"},
		{"rkf12ab-a0", 3, "rkf12ab-a0-2"},
		{"1abc", 1, ""},
		{"Train.Job", 1, ""},
		{long, 1, ""},
		{long + "x", 1, ""},
	} {
		got := JobName(tc.ta, tc.attempt)
		if tc.want != "" && got != tc.want {
			t.Errorf("JobName(%q, %d) = %q; want %q", tc.ta, tc.attempt, got, tc.want)
		}
		if errs := validation.IsDNS1035Label(got); len(errs) > 0 || len(got) > maxJobNameLen {
			t.Errorf("JobName(%q, %d) = %q: %v (length %d, at most %d)", tc.ta, tc.attempt, got, errs, len(got), maxJobNameLen)
		}
		if svc := replicaPodName(got, "Evaluator", 99999); len(validation.IsDNS1035Label(svc)) > 0 {
			t.Errorf("replica service %q is not a DNS-1035 label", svc)
		}
		if !strings.HasSuffix(got, "-"+string(rune('0'+tc.attempt-1))) {
			t.Errorf("JobName(%q, %d) = %q; want the retry suffix", tc.ta, tc.attempt, got)
		}
	}
	if JobName(long, 1) == JobName(long+"x", 1) {
		t.Error("two long names share a job name")
	}
}

// TestLoadConfig: plugins.kf-operator as Flyte's loader reads it, over
// Flyte's default timeout.
func TestLoadConfig(t *testing.T) {
	c, err := LoadConfig(config.Config{})
	if err != nil || c.Timeout.Duration != DefaultConfig().Timeout.Duration || c.Timeout.Minutes() != 1 {
		t.Fatalf("default: %+v, %v", c, err)
	}
	c, err = LoadConfig(config.Config{PluginSections: map[string]any{"kf-operator": map[string]any{"Timeout": "90s"}}})
	if err != nil || c.Timeout.Seconds() != 90 {
		t.Errorf("timeout 90s: %+v, %v", c, err)
	}
	for _, bad := range []any{"0s", "-1m", "soon"} {
		if _, err := LoadConfig(config.Config{PluginSections: map[string]any{"kf-operator": map[string]any{"timeout": bad}}}); err == nil ||
			!strings.Contains(err.Error(), "plugins.kf-operator.timeout") {
			t.Errorf("timeout %v: %v; want an error naming the key", bad, err)
		}
	}
	ps, err := New(config.Config{})
	if err != nil || len(ps) != 3 || ps[0].ID() != PyTorch || ps[1].ID() != TensorFlow || ps[2].ID() != MPI {
		t.Errorf("New: %v, %v", ps, err)
	}
}
