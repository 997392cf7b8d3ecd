package container

import (
	"encoding/base32"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
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

func TestLabels(t *testing.T) {
	identity := map[string]string{
		LabelOrganization: "flyte", LabelProject: "proj", LabelDomain: "dev", LabelRun: "run1", LabelAction: "a0",
		LabelAttempt: "2", LabelTaskName: "my.task", LabelManaged: "true",
		LabelFlyteProject: "proj", LabelFlyteDomain: "dev", LabelFlyteRun: "run1", LabelFlyteAction: "a0",
	}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range identity {
			out[k] = v
		}
		for k, v := range extra {
			if v == "" {
				delete(out, k)
			} else {
				out[k] = v
			}
		}
		return out
	}
	cases := []struct {
		name   string
		mutate func(*flytev1.TaskAction)
		s      plugin.Settings
		want   map[string]string
	}{
		{name: "identity and the TaskAction's labels", want: with(map[string]string{"team": "ml"})},
		{
			name:   "sanitized values, empty ones omitted",
			mutate: func(ta *flytev1.TaskAction) { ta.Spec.Template.ID.Name = "-mod/sub task.name-"; ta.Labels = nil },
			want:   with(map[string]string{LabelTaskName: "xmod-sub-task.namex"}),
		},
		{
			name:   "no task name",
			mutate: func(ta *flytev1.TaskAction) { ta.Spec.Template.ID.Name = ""; ta.Labels = nil },
			want:   with(map[string]string{LabelTaskName: ""}),
		},
		{
			name: "the executor's labels cannot be spoofed",
			mutate: func(ta *flytev1.TaskAction) {
				ta.Labels = map[string]string{LabelManaged: "false", LabelProject: "other", LabelAttempt: "9", LabelInjectSecrets: "true", LabelOrganization: "x"}
			},
			want: identity,
		},
		{
			name: "defaults, then the pod template, then the TaskAction",
			mutate: func(ta *flytev1.TaskAction) {
				ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Labels: map[string]string{"team": "infra", "tier": "t", LabelRun: "x"}}
				ta.Labels = map[string]string{"team": "ml"}
			},
			s:    plugin.Settings{DefaultLabels: map[string]string{"tier": "default", "zone": "z"}},
			want: with(map[string]string{"team": "ml", "tier": "t", "zone": "z"}),
		},
		{
			name: "secrets ask for injection",
			mutate: func(ta *flytev1.TaskAction) {
				ta.Labels = nil
				ta.Spec.Template.SecurityContext = &flytev1.SecurityContext{Secrets: []flytev1.Secret{{Key: "k"}}}
			},
			want: with(map[string]string{LabelInjectSecrets: "true"}),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			if tc.mutate != nil {
				tc.mutate(ta)
			}
			if got := build(t, ta, 2, tc.s).Labels; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("labels = %v\nwant     %v", got, tc.want)
			}
		})
	}
}

func TestAnnotations(t *testing.T) {
	ta := testTA()
	ta.Annotations = map[string]string{
		"note": "hi", lastAppliedAnnotation: "{...}", AnnotationSecretPrefix + "0": "spoof", AnnotationPrimaryContainer: "spoof", "both": "ta",
	}
	ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Annotations: map[string]string{"tpl": "x", "both": "template", AnnotationSecretPrefix + "7": "spoof"}}
	ta.Spec.Template.SecurityContext = &flytev1.SecurityContext{Secrets: []flytev1.Secret{
		{Group: "aws", Key: "token", MountRequirement: flytev1.MountEnvVar, EnvVar: "TOKEN"},
		{Key: "pw"},
	}}
	pod := build(t, ta, 1, plugin.Settings{DefaultAnnotations: map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false", "tpl": "default"}})
	want := map[string]string{
		"note": "hi", "both": "ta", "tpl": "x", "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
		AnnotationPrimaryContainer: "task",
	}
	for k, v := range want {
		if pod.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, pod.Annotations[k], v)
		}
	}
	if len(pod.Annotations) != len(want)+2 {
		t.Errorf("annotations = %v", pod.Annotations)
	}
	// The secret requests decode, with protobuf's own text parser, to the template's secrets.
	enc := base32.NewEncoding("abcdefghijklmnopqrstuvwxyz123456").WithPadding(base32.NoPadding)
	for key, want := range map[string]*core.Secret{
		AnnotationSecretPrefix + "0": {Group: "aws", Key: "token", MountRequirement: core.Secret_ENV_VAR, EnvVar: "TOKEN"},
		AnnotationSecretPrefix + "1": {Key: "pw"},
	} {
		b, err := enc.DecodeString(pod.Annotations[key])
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		got := &core.Secret{}
		if err := prototext.Unmarshal(b, got); err != nil || got.String() != want.String() {
			t.Errorf("%s = %q → %v, %v; want %v", key, b, got, err, want)
		}
	}
	// The text form is Flyte's: one "name: value" line per set field.
	if b, _ := enc.DecodeString(pod.Annotations[AnnotationSecretPrefix+"0"]); string(b) != "group: \"aws\"\nkey: \"token\"\nmount_requirement: ENV_VAR\nenv_var: \"TOKEN\"\n" {
		t.Errorf("secret text = %q", b)
	}

	raw := testTA()
	raw.Spec.TaskType = task.TypeRawContainer
	if got := build(t, raw, 1, plugin.Settings{}).Annotations; got[AnnotationPrimaryContainer] != "" {
		t.Errorf("raw-container pod annotated with its primary container: %v", got)
	}
}

func envMap(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := out[e.Name]; dup {
			panic("duplicate env " + e.Name)
		}
		out[e.Name] = e
	}
	return out
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}

func TestEnv(t *testing.T) {
	ta := testTA()
	ta.Spec.Template.Container.Env = []corev1.EnvVar{{Name: "A", Value: "template"}, {Name: "FLYTE_ATTEMPT_NUMBER", Value: "template"}, {Name: "D", Value: "template"}}
	ta.Spec.EnvVars = map[string]string{"B": "run", "ACTION_NAME": "spoof", "_U_RUN_BASE": "spoof", "D": "run"}
	setPodSpec(t, ta, flytev1.PodTemplate{}, &corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
		Containers:     []corev1.Container{{Name: "side", Image: "envoy", Env: []corev1.EnvVar{{Name: "S", Value: "side"}}}},
	})
	s := plugin.Settings{DefaultEnvVars: map[string]string{"_U_EP_OVERRIDE": "dns:///flyte:8089", "D": "default"}}
	pod := build(t, ta, 3, s)
	p := primaryOf(t, pod)
	wantOrder := []string{"A", "FLYTE_ATTEMPT_NUMBER", "D", "FLYTE_INTERNAL_EXECUTION_ID", "FLYTE_INTERNAL_EXECUTION_PROJECT",
		"FLYTE_INTERNAL_EXECUTION_DOMAIN", "_F_PN", "FLYTE_INTERNAL_TASK_PROJECT", "FLYTE_INTERNAL_TASK_DOMAIN",
		"FLYTE_INTERNAL_TASK_NAME", "FLYTE_INTERNAL_TASK_VERSION", "FLYTE_INTERNAL_PROJECT", "FLYTE_INTERNAL_DOMAIN",
		"FLYTE_INTERNAL_NAME", "FLYTE_INTERNAL_VERSION", "ACTION_NAME", "RUN_NAME", "_U_RUN_BASE", "_U_ORG_NAME", "B", "_U_EP_OVERRIDE"}
	if got := envNames(p); !reflect.DeepEqual(got, wantOrder) {
		t.Errorf("env order = %v\nwant        %v", got, wantOrder)
	}
	env := envMap(p)
	for k, v := range map[string]string{
		"A": "template", "FLYTE_ATTEMPT_NUMBER": "2", "D": "default", "FLYTE_INTERNAL_EXECUTION_ID": "run1",
		"FLYTE_INTERNAL_EXECUTION_PROJECT": "proj", "FLYTE_INTERNAL_TASK_PROJECT": "proj", "FLYTE_INTERNAL_NAME": "my.task",
		"FLYTE_INTERNAL_VERSION": "v1", "ACTION_NAME": "a0", "RUN_NAME": "run1", "_U_RUN_BASE": "s3://bucket/run1/",
		"_U_ORG_NAME": "local", "B": "run", "_U_EP_OVERRIDE": "dns:///flyte:8089",
	} {
		if env[k].Value != v {
			t.Errorf("%s = %q, want %q", k, env[k].Value, v)
		}
	}
	if f := env["_F_PN"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("_F_PN = %+v", env["_F_PN"])
	}
	// Every container of the pod gets the task's environment.
	for _, c := range append(pod.Spec.InitContainers, container(t, pod, "side")) {
		if e := envMap(c); e["RUN_NAME"].Value != "run1" || e["FLYTE_ATTEMPT_NUMBER"].Value != "2" {
			t.Errorf("container %s env = %v", c.Name, envNames(c))
		}
	}
	if e := envMap(container(t, pod, "side")); e["S"].Value != "side" {
		t.Errorf("sidecar lost its own env")
	}
	// Without a task identity there are no FLYTE_INTERNAL_TASK_* variables.
	anon := testTA()
	anon.Spec.Template.ID = flytev1.TaskID{}
	anon.Spec.Project, anon.Spec.Domain = "", ""
	tk := decode(t, anon)
	tk.ID = task.Identifier{}
	pod, err := BuildPod(plugin.TaskContext{TaskAction: anon, Task: tk, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := envMap(pod.Spec.Containers[0])["FLYTE_INTERNAL_TASK_NAME"]; ok {
		t.Error("FLYTE_INTERNAL_TASK_NAME without a task identity")
	}
}

func rl(kv ...string) corev1.ResourceList {
	if len(kv) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestResources(t *testing.T) {
	flyteDefaults := plugin.Settings{DefaultCPU: "1000m", DefaultMemory: "1024Mi"}
	for _, tc := range []struct {
		name          string
		in            corev1.ResourceRequirements
		gpu           *task.GPUAccelerator
		s             plugin.Settings
		wantReq, wLim corev1.ResourceList
	}{
		{name: "nothing set: the defaults", s: flyteDefaults,
			wantReq: rl("cpu", "1", "memory", "1Gi"), wLim: rl("cpu", "1", "memory", "1Gi")},
		{name: "nothing set, no defaults"},
		{name: "a limit gives the request", in: corev1.ResourceRequirements{Limits: rl("cpu", "2")}, s: flyteDefaults,
			wantReq: rl("cpu", "2", "memory", "1Gi"), wLim: rl("cpu", "2", "memory", "1Gi")},
		{name: "a request gives the limit", in: corev1.ResourceRequirements{Requests: rl("memory", "3Gi")}, s: flyteDefaults,
			wantReq: rl("cpu", "1", "memory", "3Gi"), wLim: rl("cpu", "1", "memory", "3Gi")},
		{name: "a request above its limit is lowered", in: corev1.ResourceRequirements{Requests: rl("cpu", "4"), Limits: rl("cpu", "2")},
			wantReq: rl("cpu", "2"), wLim: rl("cpu", "2")},
		{name: "ephemeral storage only when asked for", in: corev1.ResourceRequirements{Requests: rl("ephemeral-storage", "5Gi")},
			wantReq: rl("ephemeral-storage", "5Gi"), wLim: rl("ephemeral-storage", "5Gi")},
		{name: "a generic gpu is an nvidia gpu", in: corev1.ResourceRequirements{Limits: rl("gpu", "1")},
			wantReq: rl("nvidia.com/gpu", "1"), wLim: rl("nvidia.com/gpu", "1")},
		{name: "the configured gpu resource", in: corev1.ResourceRequirements{Requests: rl("gpu", "2")}, s: plugin.Settings{GPUResourceName: "amd.com/gpu"},
			wantReq: rl("amd.com/gpu", "2"), wLim: rl("amd.com/gpu", "2")},
		{name: "the accelerator class's resource", in: corev1.ResourceRequirements{Limits: rl("gpu", "4")}, gpu: &task.GPUAccelerator{DeviceClass: "GOOGLE_TPU"},
			wantReq: rl("google.com/tpu", "4"), wLim: rl("google.com/tpu", "4")},
		{name: "other extended resources are left alone", in: corev1.ResourceRequirements{Requests: rl("example.com/fpga", "1")},
			wantReq: rl("example.com/fpga", "1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			tk := decode(t, ta)
			tk.Container.Resources = tc.in
			tk.Extended.GPU = tc.gpu
			pod, err := BuildPod(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: tc.s})
			if err != nil {
				t.Fatal(err)
			}
			got := pod.Spec.Containers[0].Resources
			if !equality.Semantic.DeepEqual(got.Requests, tc.wantReq) || !equality.Semantic.DeepEqual(got.Limits, tc.wLim) {
				t.Errorf("resources = %v / %v, want %v / %v", got.Requests, got.Limits, tc.wantReq, tc.wLim)
			}
		})
	}
	// Other containers keep their resources; only a generic gpu is renamed.
	ta := testTA()
	setPodSpec(t, ta, flytev1.PodTemplate{}, &corev1.PodSpec{Containers: []corev1.Container{{Name: "side", Image: "x",
		Resources: corev1.ResourceRequirements{Requests: rl("memory", "1Gi", "gpu", "1")}}}})
	side := container(t, build(t, ta, 1, flyteDefaults), "side")
	if !equality.Semantic.DeepEqual(side.Resources.Requests, rl("memory", "1Gi", "nvidia.com/gpu", "1")) || side.Resources.Limits != nil {
		t.Errorf("sidecar resources = %+v", side.Resources)
	}
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

func TestTemplating(t *testing.T) {
	ta := testTA()
	ta.Name, ta.Spec.ActionName = "r1-a0", "a0"
	prefix1, prefix2 := task.OutputPrefix(ta, 1), task.OutputPrefix(ta, 2)
	if !strings.Contains(prefix1, "/run1/a0/1") {
		t.Fatalf("output prefix = %q", prefix1)
	}
	for _, tc := range []struct {
		name    string
		attempt int32
		in      string
		want    string
	}{
		{"input file", 1, "{{.input}}", "s3://bucket/run1/a0/inputs.pb"},
		{"input prefix, spaces and case", 1, "{{ .INPUTPREFIX }}", "s3://bucket/run1/a0"},
		{"dollar form", 1, "{{$OutputPrefix}}", prefix1},
		{"raw data is the output prefix", 2, "{{.rawOutputDataPrefix}}", prefix2},
		{"checkpoints", 2, "--ckpt={{.checkpointOutputPrefix}}", "--ckpt=" + prefix2 + "/_flytecheckpoints"},
		{"previous checkpoint", 2, "{{.prevCheckpointPrefix}}", prefix1 + "/_flytecheckpoints"},
		{"no previous checkpoint on the first attempt", 1, "{{.prevCheckpointPrefix}}", `""`},
		{"per-retry key", 2, "{{.perRetryUniqueKey}}", "r1_a0_1"},
		{"namespace", 1, "{{.namespace}}", "ns"},
		{"template path", 1, "{{.taskTemplatePath}}", "inline://taskTemplate"},
		{"a go-template passes through", 1, "kubectl get pods -o go-template='{{.metadata.name}}'", "kubectl get pods -o go-template='{{.metadata.name}}'"},
		{"flyte-sdk's run placeholders pass through", 1, "{{.runName}}/{{.actionName}}", "{{.runName}}/{{.actionName}}"},
		{"input values pass through", 1, "{{.Inputs.x}}", "{{.Inputs.x}}"},
		{"unknown names pass through", 1, "{{.nosuchthing}} {{ range . }}", "{{.nosuchthing}} {{ range . }}"},
		{"no space inside the dot form", 1, "{{. input}}", "{{. input}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := ta.DeepCopy()
			ta.Spec.Template.Container.Args = []string{tc.in}
			setPodSpec(t, ta, flytev1.PodTemplate{}, &corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "init", Image: "x", Command: []string{tc.in}}},
				Containers:     []corev1.Container{{Name: "side", Image: "x", Args: []string{tc.in}}},
			})
			pod := build(t, ta, tc.attempt, plugin.Settings{})
			for _, got := range []string{primaryOf(t, pod).Args[0], container(t, pod, "side").Args[0], pod.Spec.InitContainers[0].Command[0]} {
				if got != tc.want {
					t.Errorf("rendered %q = %q, want %q", tc.in, got, tc.want)
				}
			}
		})
	}
}

func TestScheduling(t *testing.T) {
	spot := corev1.Toleration{Key: "spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	def := corev1.Toleration{Key: "dedicated", Value: "flyte", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule}
	own := corev1.Toleration{Key: "own", Operator: corev1.TolerationOpExists}
	spotReq := corev1.NodeSelectorRequirement{Key: "lifecycle", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}
	onDemand := corev1.NodeSelectorRequirement{Key: "lifecycle", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"spot"}}
	s := plugin.Settings{
		DefaultTolerations: []corev1.Toleration{def}, DefaultNodeSelector: map[string]string{"pool": "default", "arch": "amd64"},
		InterruptibleTolerations: []corev1.Toleration{spot}, InterruptibleNodeSelector: map[string]string{"pool": "spot"},
		InterruptibleNodeSelectorRequirement: &spotReq, NonInterruptibleNodeSelectorRequirement: &onDemand,
	}
	for _, tc := range []struct {
		name          string
		interruptible *bool
		wantTols      []corev1.Toleration
		wantNS        map[string]string
		wantReq       corev1.NodeSelectorRequirement
	}{
		{"interruptible", ptr(true), []corev1.Toleration{spot, def, own}, map[string]string{"pool": "spot", "arch": "arm64"}, spotReq},
		{"not interruptible", ptr(false), []corev1.Toleration{def, own}, map[string]string{"pool": "default", "arch": "arm64"}, onDemand},
		{"unset", nil, []corev1.Toleration{def, own}, map[string]string{"pool": "default", "arch": "arm64"}, onDemand},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			ta.Spec.Interruptible = tc.interruptible
			setPodSpec(t, ta, flytev1.PodTemplate{}, &corev1.PodSpec{Tolerations: []corev1.Toleration{own}, NodeSelector: map[string]string{"arch": "arm64"}})
			pod := build(t, ta, 1, s)
			if !reflect.DeepEqual(pod.Spec.Tolerations, tc.wantTols) {
				t.Errorf("tolerations = %+v", pod.Spec.Tolerations)
			}
			if !reflect.DeepEqual(pod.Spec.NodeSelector, tc.wantNS) {
				t.Errorf("node selector = %v", pod.Spec.NodeSelector)
			}
			terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 1 || !reflect.DeepEqual(terms[0].MatchExpressions, []corev1.NodeSelectorRequirement{tc.wantReq}) {
				t.Errorf("node affinity = %+v", terms)
			}
		})
	}
}

func TestExtendedResources(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limits    corev1.ResourceList
		gpu       *task.GPUAccelerator
		wantReqs  []corev1.NodeSelectorRequirement
		wantTols  []corev1.Toleration
		wantSlice string
	}{
		{
			name: "a known device and a MIG partition", limits: rl("gpu", "1"),
			gpu: &task.GPUAccelerator{Device: "a100", DeviceClass: "NVIDIA_GPU", PartitionSize: "3g.40gb"},
			wantReqs: []corev1.NodeSelectorRequirement{
				{Key: "k8s.amazonaws.com/accelerator", Operator: corev1.NodeSelectorOpIn, Values: []string{"nvidia-tesla-a100"}},
				{Key: "k8s.amazonaws.com/gpu-partition-size", Operator: corev1.NodeSelectorOpIn, Values: []string{"3g.40gb"}},
			},
			wantTols: []corev1.Toleration{
				{Key: "k8s.amazonaws.com/accelerator", Operator: corev1.TolerationOpEqual, Value: "nvidia-tesla-a100", Effect: corev1.TaintEffectNoSchedule},
				{Key: "k8s.amazonaws.com/gpu-partition-size", Operator: corev1.TolerationOpEqual, Value: "3g.40gb", Effect: corev1.TaintEffectNoSchedule},
			},
			wantSlice: "3",
		},
		{
			name: "a TPU, whole", limits: rl("gpu", "4"), gpu: &task.GPUAccelerator{Device: "v5p", DeviceClass: "GOOGLE_TPU", Unpartitioned: true},
			wantReqs: []corev1.NodeSelectorRequirement{
				{Key: "cloud.google.com/gke-tpu-accelerator", Operator: corev1.NodeSelectorOpIn, Values: []string{"tpu-v5p-slice"}},
				{Key: "cloud.google.com/gke-tpu-topology", Operator: corev1.NodeSelectorOpDoesNotExist},
			},
			wantTols: []corev1.Toleration{{Key: "cloud.google.com/gke-tpu-accelerator", Operator: corev1.TolerationOpEqual, Value: "tpu-v5p-slice", Effect: corev1.TaintEffectNoSchedule}},
		},
		{
			name: "an unknown device name is used as it is", limits: rl("nvidia.com/gpu", "1"), gpu: &task.GPUAccelerator{Device: "X9"},
			wantReqs: []corev1.NodeSelectorRequirement{{Key: "k8s.amazonaws.com/accelerator", Operator: corev1.NodeSelectorOpIn, Values: []string{"X9"}}},
			wantTols: []corev1.Toleration{{Key: "k8s.amazonaws.com/accelerator", Operator: corev1.TolerationOpEqual, Value: "X9", Effect: corev1.TaintEffectNoSchedule}},
		},
		{name: "no accelerator asked for: no placement", gpu: &task.GPUAccelerator{Device: "A100", PartitionSize: "1g.5gb"}, wantSlice: "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			tk := decode(t, ta)
			tk.Container.Resources.Limits = tc.limits
			tk.Extended.GPU = tc.gpu
			pod, err := BuildPod(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1})
			if err != nil {
				t.Fatal(err)
			}
			var reqs []corev1.NodeSelectorRequirement
			if na := pod.Spec.Affinity.NodeAffinity; na != nil {
				reqs = na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions
			}
			if !reflect.DeepEqual(reqs, tc.wantReqs) || !reflect.DeepEqual(pod.Spec.Tolerations, tc.wantTols) {
				t.Errorf("requirements = %+v\ntolerations = %+v", reqs, pod.Spec.Tolerations)
			}
			if got := pod.Labels[LabelGPUPartitionSlices]; got != tc.wantSlice {
				t.Errorf("partition slices label = %q, want %q", got, tc.wantSlice)
			}
		})
	}

	ta := testTA()
	tk := decode(t, ta)
	tk.Extended.SharedMemory = &task.SharedMemory{MountName: "shm", MountPath: "/dev/shm", SizeLimit: "2Gi"}
	pod, err := BuildPod(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	size := resource.MustParse("2Gi")
	wantVol := corev1.Volume{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}}
	if len(pod.Spec.Volumes) != 1 || !equality.Semantic.DeepEqual(pod.Spec.Volumes[0], wantVol) ||
		!reflect.DeepEqual(pod.Spec.Containers[0].VolumeMounts, []corev1.VolumeMount{{Name: "shm", MountPath: "/dev/shm"}}) {
		t.Errorf("volumes = %+v, mounts = %+v", pod.Spec.Volumes, pod.Spec.Containers[0].VolumeMounts)
	}
	for _, clash := range []struct {
		spec    corev1.PodSpec
		contain string
	}{
		{corev1.PodSpec{Volumes: []corev1.Volume{{Name: "shm"}}}, `already has a volume named "shm"`},
		{corev1.PodSpec{Containers: []corev1.Container{{Name: "task", VolumeMounts: []corev1.VolumeMount{{Name: "x", MountPath: "/dev/shm"}}}}}, "/dev/shm is already mounted"},
	} {
		tk.PodSpec = clash.spec.DeepCopy()
		_, err := BuildPod(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1})
		wantBadSpec(t, err, clash.contain)
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

// {{.Inputs.x}} renders the input's value when the inputs were read; without
// them it stays as it is; an input the inputs lack is a task-specification error.
func TestInputPlaceholders(t *testing.T) {
	ta := testTA()
	ta.Spec.Template.Container.Args = []string{"--x={{.Inputs.x}}", "{{ $inputs.name }}", "{{.runName}}"}
	inputs := &core.LiteralMap{Literals: map[string]*core.Literal{
		"x":    {Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_Integer{Integer: 7}}}}}},
		"name": {Value: &core.Literal_Scalar{Scalar: &core.Scalar{Value: &core.Scalar_Primitive{Primitive: &core.Primitive{Value: &core.Primitive_StringValue{StringValue: "ada"}}}}}},
	}}
	tc := plugin.TaskContext{TaskAction: ta, Task: decode(t, ta), Attempt: 1, Inputs: inputs}
	pod, err := BuildPod(tc)
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Containers[0].Args; !slices.Equal(got, []string{"--x=7", "ada", "{{.runName}}"}) {
		t.Errorf("args with inputs = %q", got)
	}

	tc.Inputs = nil
	if pod, err = BuildPod(tc); err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Containers[0].Args; !slices.Equal(got, ta.Spec.Template.Container.Args) {
		t.Errorf("args without inputs = %q, want them untouched", got)
	}

	tc.Inputs = &core.LiteralMap{}
	_, err = BuildPod(tc)
	var le *plugin.LaunchError
	if !errors.As(err, &le) || le.Retryable || !strings.Contains(le.Err.Message, "requested input is not found [x]") {
		t.Errorf("missing input: %v, want a permanent launch error naming x", err)
	}
}
