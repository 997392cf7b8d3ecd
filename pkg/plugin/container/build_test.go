package container

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

func testTA() *flytev1.TaskAction {
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{
			Name: "act", Namespace: "ns", UID: "uid-1",
			Labels:      map[string]string{"team": "ml"},
			Annotations: map[string]string{"note": "hi"},
		},
		Spec: flytev1.TaskActionSpec{
			RunName: "run1", Project: "proj", Domain: "dev", ActionName: "a0", TaskType: "container",
			InputURI: "s3://bucket/run1/a0/inputs.pb", RunOutputBase: "s3://bucket/run1/",
			Template: &flytev1.TypedTaskTemplate{
				ID: flytev1.TaskID{Name: "my.task", Version: "v1"},
				Container: &flytev1.Container{
					Image:   "python:3.12",
					Command: []string{"python"},
					Args:    []string{"--inputs", "{{.input}}"},
				},
			},
		},
	}
}

func decode(t *testing.T, ta *flytev1.TaskAction) *task.Task {
	t.Helper()
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return tk
}

func buildErr(t *testing.T, ta *flytev1.TaskAction, attempt int32, s plugin.Settings) (*corev1.Pod, error) {
	t.Helper()
	return BuildPod(plugin.TaskContext{TaskAction: ta, Task: decode(t, ta), Attempt: attempt, Settings: s})
}

func build(t *testing.T, ta *flytev1.TaskAction, attempt int32, s plugin.Settings) *corev1.Pod {
	t.Helper()
	pod, err := buildErr(t, ta, attempt, s)
	if err != nil {
		t.Fatalf("BuildPod: %v", err)
	}
	return pod
}

func container(t *testing.T, pod *corev1.Pod, name string) corev1.Container {
	t.Helper()
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q in %v", name, pod.Spec.Containers)
	return corev1.Container{}
}

func primaryOf(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	return container(t, pod, pod.Annotations[AnnotationPrimaryContainer])
}

func wantBadSpec(t *testing.T, err error, contains string) {
	t.Helper()
	var le *plugin.LaunchError
	if !errors.As(err, &le) {
		t.Fatalf("error %v is not a *LaunchError", err)
	}
	if le.Retryable || le.Err.Code != CodeBadTaskSpecification || le.Err.Kind != flytev1.ErrorKindUser {
		t.Errorf("error = %+v, want permanent USER BadTaskSpecification", le)
	}
	if !strings.Contains(le.Err.Message, contains) {
		t.Errorf("message %q does not mention %q", le.Err.Message, contains)
	}
}

func setPodSpec(t *testing.T, ta *flytev1.TaskAction, pt flytev1.PodTemplate, spec *corev1.PodSpec) {
	t.Helper()
	if spec != nil {
		doc, err := flytev1.PodSpecDocumentOf(spec)
		if err != nil {
			t.Fatal(err)
		}
		pt.Spec = doc
	}
	ta.Spec.Template.PodTemplate = &pt
}

func TestBuildPodBasics(t *testing.T) {
	ta := testTA()
	orig := ta.DeepCopy()
	pod := build(t, ta, 2, plugin.Settings{})
	if !equality.Semantic.DeepEqual(ta, orig) {
		t.Error("BuildPod modified the TaskAction")
	}
	if pod.Name != "act-1" || pod.Namespace != "ns" {
		t.Errorf("pod = %s/%s", pod.Namespace, pod.Name)
	}
	o := metav1.GetControllerOf(pod)
	if o == nil || o.Kind != "TaskAction" || o.Name != "act" || o.UID != "uid-1" || o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion {
		t.Errorf("owner = %+v", o)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks || pod.Spec.Affinity == nil {
		t.Errorf("spec = %+v", pod.Spec)
	}
	if len(pod.Spec.Containers) != 1 || pod.Annotations[AnnotationPrimaryContainer] != DefaultPrimaryContainerName {
		t.Fatalf("containers = %+v, annotations = %v", pod.Spec.Containers, pod.Annotations)
	}
	c := pod.Spec.Containers[0]
	if c.Image != "python:3.12" || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("container = %+v", c)
	}
	// Without a task in the context, the plugin decodes the TaskAction itself.
	again, err := BuildPod(plugin.TaskContext{TaskAction: ta, Attempt: 2})
	if err != nil || !equality.Semantic.DeepEqual(again, pod) {
		t.Errorf("BuildPod without a task = %v, %v", again, err)
	}
}

func TestBuildPodErrors(t *testing.T) {
	if _, err := BuildPod(plugin.TaskContext{}); err == nil {
		t.Error("no TaskAction: no error")
	}
	undecodable := testTA()
	undecodable.Spec.Template = nil
	_, err := BuildPod(plugin.TaskContext{TaskAction: undecodable, Attempt: 1})
	wantBadSpec(t, err, "spec.taskTemplate")

	for _, tc := range []struct {
		name    string
		mutate  func(*flytev1.TaskAction) *task.Task
		s       plugin.Settings
		contain string
		plain   bool
	}{
		{name: "primary name not a DNS label", mutate: func(ta *flytev1.TaskAction) *task.Task {
			setPodTemplateName(ta, "Main_1")
			return nil
		}, contain: `primary container name "Main_1"`},
		{name: "pod spec without the primary container", mutate: func(ta *flytev1.TaskAction) *task.Task {
			tk := decode(&testing.T{}, ta)
			tk.Container, tk.PodSpec, tk.PrimaryContainerName = nil, &corev1.PodSpec{Containers: []corev1.Container{{Name: "other", Image: "x"}}}, "main"
			return tk
		}, contain: `the primary container "main" is not in the pod spec`},
		{name: "no image", mutate: func(ta *flytev1.TaskAction) *task.Task {
			tk := decode(&testing.T{}, ta)
			tk.Container.Image = ""
			return tk
		}, contain: "has no image"},
		{name: "placeholder without inputs", mutate: func(ta *flytev1.TaskAction) *task.Task {
			ta.Spec.InputURI = ""
			return nil
		}, contain: `placeholder "{{.input}}" in containers[task].args[1] cannot be rendered: spec.inputUri is empty`},
		{name: "placeholder without output base", mutate: func(ta *flytev1.TaskAction) *task.Task {
			ta.Spec.RunOutputBase = ""
			ta.Spec.Template.Container.Args = []string{"{{.outputPrefix}}", "{{.checkpointOutputPrefix}}"}
			return nil
		}, contain: "spec.runOutputBase is empty"},
		{name: "bad secret mount", mutate: func(ta *flytev1.TaskAction) *task.Task {
			tk := decode(&testing.T{}, ta)
			tk.Secrets = []task.Secret{{Key: "k", Mount: "DISK"}}
			return tk
		}, contain: `unknown mount requirement "DISK"`},
		{name: "shared memory without a name", mutate: func(ta *flytev1.TaskAction) *task.Task {
			tk := decode(&testing.T{}, ta)
			tk.Extended.SharedMemory = &task.SharedMemory{MountPath: "/dev/shm"}
			return tk
		}, contain: "mount name is not set"},
		{name: "bad default CPU", s: plugin.Settings{DefaultCPU: "lots"}, plain: true, contain: "lots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			var tk *task.Task
			if tc.mutate != nil {
				tk = tc.mutate(ta)
			}
			if tk == nil {
				tk = decode(t, ta)
			}
			_, err := BuildPod(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: tc.s})
			if tc.plain {
				var le *plugin.LaunchError
				if err == nil || errors.As(err, &le) || !strings.Contains(err.Error(), tc.contain) {
					t.Errorf("error = %v, want a plain error mentioning %q", err, tc.contain)
				}
				return
			}
			wantBadSpec(t, err, tc.contain)
		})
	}
	if ValidateSettings(plugin.Settings{DefaultCPU: "lots"}) == nil || ValidateSettings(plugin.Settings{DefaultCPU: "1", DefaultMemory: "1Gi"}) != nil {
		t.Error("ValidateSettings")
	}
}

func setPodTemplateName(ta *flytev1.TaskAction, name string) {
	ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{PrimaryContainerName: name}
}

func TestServiceAccount(t *testing.T) {
	for _, tc := range []struct{ runAs, spec, def, want string }{
		{"runner", "tpl", "default-sa", "runner"},
		{"", "tpl", "default-sa", "tpl"},
		{"", "", "default-sa", "default-sa"},
		{"", "", "", ""},
	} {
		ta := testTA()
		if tc.runAs != "" {
			ta.Spec.Template.SecurityContext = &flytev1.SecurityContext{RunAs: &flytev1.RunAs{K8sServiceAccount: tc.runAs}}
		}
		if tc.spec != "" {
			setPodSpec(t, ta, flytev1.PodTemplate{}, &corev1.PodSpec{ServiceAccountName: tc.spec})
		}
		if got := build(t, ta, 1, plugin.Settings{DefaultServiceAccount: tc.def}).Spec.ServiceAccountName; got != tc.want {
			t.Errorf("%+v: serviceAccountName = %q", tc, got)
		}
	}
}

func TestPodTemplateMerge(t *testing.T) {
	ta := testTA()
	ta.Spec.Template.Container.Env = []corev1.EnvVar{{Name: "X", Value: "task"}}
	ta.Spec.Template.Container.Resources = corev1.ResourceRequirements{Limits: rl("cpu", "2")}
	setPodSpec(t, ta, flytev1.PodTemplate{PrimaryContainerName: "main"}, &corev1.PodSpec{
		Containers: []corev1.Container{
			{Name: "side", Image: "envoy"},
			{Name: "main", Image: "ignored", Args: []string{"ignored"}, WorkingDir: "/w",
				Env:          []corev1.EnvVar{{Name: "X", Value: "template"}, {Name: "Y", Value: "template"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				Resources:    corev1.ResourceRequirements{Requests: rl("memory", "1Gi")}},
		},
		Volumes:          []corev1.Volume{{Name: "data"}},
		RestartPolicy:    corev1.RestartPolicyOnFailure,
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "reg"}},
	})
	pod := build(t, ta, 1, plugin.Settings{})
	if len(pod.Spec.Containers) != 2 || pod.Spec.Containers[0].Name != "side" || pod.Annotations[AnnotationPrimaryContainer] != "main" {
		t.Fatalf("containers = %+v", pod.Spec.Containers)
	}
	m := pod.Spec.Containers[1]
	if m.Image != "python:3.12" || m.Args[0] != "--inputs" || m.WorkingDir != "/w" || len(m.VolumeMounts) != 1 {
		t.Errorf("merged container = %+v", m)
	}
	if e := envMap(m); e["X"].Value != "task" || e["Y"].Value != "template" {
		t.Errorf("env = %v", m.Env)
	}
	if !equality.Semantic.DeepEqual(m.Resources.Limits, rl("cpu", "2", "memory", "1Gi")) {
		t.Errorf("resources = %+v", m.Resources)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyOnFailure || len(pod.Spec.ImagePullSecrets) != 1 || len(pod.Spec.Volumes) != 1 {
		t.Errorf("pod spec = %+v", pod.Spec)
	}
	// A primary container the template does not have comes first.
	other := testTA()
	setPodSpec(t, other, flytev1.PodTemplate{}, &corev1.PodSpec{Containers: []corev1.Container{{Name: "side", Image: "envoy"}}})
	if cs := build(t, other, 1, plugin.Settings{}).Spec.Containers; len(cs) != 2 || cs[0].Name != "task" {
		t.Errorf("containers = %+v", cs)
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkBuildPod is the cost of one pod build (the webhook's check and
// the launch each make one per TaskAction).
func BenchmarkBuildPod(b *testing.B) {
	ta := testTA()
	ta.Spec.Template.Container.Args = []string{"--inputs", "{{.input}}", "--outputs", "{{.outputPrefix}}", "--raw", "{{.rawOutputDataPrefix}}"}
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		b.Fatal(err)
	}
	s := plugin.Settings{DefaultCPU: "1", DefaultMemory: "1Gi", DefaultEnvVars: map[string]string{"A": "1"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := BuildPod(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: s}); err != nil {
			b.Fatal(err)
		}
	}
}
