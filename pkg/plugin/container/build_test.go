package container

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/webhook/secrets"
)

func testTA() *flytev1.TaskAction {
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{
			Name: "act", Namespace: "ns", UID: "uid-1",
			Labels:      map[string]string{"team": "ml"},
			Annotations: map[string]string{"note": "hi"},
		},
		Spec: flytev1.TaskActionSpec{
			RunName: "run1", Project: "proj", Domain: "dev", ActionName: "a0",
			InputURI: "s3://bucket/run1/a0/inputs.pb", RunOutputBase: "s3://bucket/run1/",
			TaskTemplate: &flytev1.TaskTemplate{
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

func build(t *testing.T, ta *flytev1.TaskAction, attempt int32, s plugin.Settings) *corev1.Pod {
	t.Helper()
	pod, err := BuildPod(plugin.TaskContext{TaskAction: ta, Attempt: attempt, Settings: s})
	if err != nil {
		t.Fatalf("BuildPod: %v", err)
	}
	return pod
}

func primaryOf(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	name := pod.Annotations[AnnotationPrimaryContainer]
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no primary container %q in %v", name, pod.Spec.Containers)
	return corev1.Container{}
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

func TestBuildPodBasics(t *testing.T) {
	ta := testTA()
	orig := ta.DeepCopy()
	pod := build(t, ta, 2, plugin.Settings{})
	if !equality.Semantic.DeepEqual(ta, orig) {
		t.Errorf("BuildPod modified the TaskAction")
	}
	if pod.Name != "act-1" || pod.Namespace != "ns" {
		t.Errorf("name = %s/%s", pod.Namespace, pod.Name)
	}
	if len(pod.OwnerReferences) != 1 {
		t.Fatalf("owner refs = %v", pod.OwnerReferences)
	}
	o := pod.OwnerReferences[0]
	if o.APIVersion != "flyte.org/v1" || o.Kind != "TaskAction" || o.Name != "act" || o.UID != "uid-1" ||
		o.Controller == nil || !*o.Controller || o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion {
		t.Errorf("owner ref = %+v", o)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %q", pod.Spec.RestartPolicy)
	}
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		t.Errorf("enableServiceLinks = %v", pod.Spec.EnableServiceLinks)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("containers = %v", pod.Spec.Containers)
	}
	c := pod.Spec.Containers[0]
	if c.Name != DefaultPrimaryContainerName || c.Image != "python:3.12" || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("container = %+v", c)
	}
	if !reflect.DeepEqual(c.Args, []string{"--inputs", "s3://bucket/run1/a0/inputs.pb"}) {
		t.Errorf("args = %q", c.Args)
	}
	if pod.Annotations["note"] != "hi" || pod.Annotations[AnnotationPrimaryContainer] != "task" {
		t.Errorf("annotations = %v", pod.Annotations)
	}
}

func TestBuildPodErrors(t *testing.T) {
	cases := []struct {
		name     string
		mutate   func(*flytev1.TaskAction)
		contains string
	}{
		{"no template", func(ta *flytev1.TaskAction) { ta.Spec.TaskTemplate = nil }, "no container"},
		{"no container", func(ta *flytev1.TaskAction) { ta.Spec.TaskTemplate.Container = nil }, "no container"},
		{"empty image", func(ta *flytev1.TaskAction) { ta.Spec.TaskTemplate.Container.Image = "" }, "no image"},
		{"bad primary name", func(ta *flytev1.TaskAction) {
			ta.Spec.TaskTemplate.PodTemplate = &flytev1.PodTemplate{PrimaryContainerName: "Bad_Name"}
		}, "Bad_Name"},
		{"unknown placeholder", func(ta *flytev1.TaskAction) {
			ta.Spec.TaskTemplate.Container.Args = []string{"{{.nosuchthing}}"}
		}, "nosuchthing"},
		{"request above limit", func(ta *flytev1.TaskAction) {
			ta.Spec.TaskTemplate.Container.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}
		}, "above its limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			tc.mutate(ta)
			_, err := BuildPod(plugin.TaskContext{TaskAction: ta, Attempt: 1})
			wantBadSpec(t, err, tc.contains)
		})
	}
	// A broken executor default is the executor's problem, not the task's.
	_, err := BuildPod(plugin.TaskContext{TaskAction: testTA(), Attempt: 1, Settings: plugin.Settings{DefaultCPU: "lots"}})
	var le *plugin.LaunchError
	if err == nil || errors.As(err, &le) {
		t.Errorf("bad default CPU: err = %v, want a plain error", err)
	}
	if ValidateSettings(plugin.Settings{DefaultCPU: "lots"}) == nil || ValidateSettings(plugin.Settings{DefaultCPU: "1", DefaultMemory: "1Gi"}) != nil {
		t.Errorf("ValidateSettings")
	}
}

func TestLabels(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*flytev1.TaskAction)
		want   map[string]string
		absent []string
	}{
		{
			name:   "injected",
			mutate: func(*flytev1.TaskAction) {},
			want: map[string]string{
				"team": "ml", LabelManaged: "true", LabelProject: "proj", LabelDomain: "dev",
				LabelRun: "run1", LabelAction: "a0", LabelAttempt: "2", LabelTaskName: "my.task",
			},
		},
		{
			name: "sanitised",
			mutate: func(ta *flytev1.TaskAction) {
				ta.Spec.TaskTemplate.ID.Name = "mod/sub:task name_"
				ta.Spec.RunName = "-run-"
			},
			want: map[string]string{LabelTaskName: "mod-sub-task-name", LabelRun: "run"},
		},
		{
			name:   "empty values omitted",
			mutate: func(ta *flytev1.TaskAction) { ta.Spec.TaskTemplate.ID.Name = "" },
			absent: []string{LabelTaskName},
		},
		{
			name: "TaskAction labels cannot spoof injected ones",
			mutate: func(ta *flytev1.TaskAction) {
				ta.Spec.TaskTemplate.ID.Name = ""
				ta.Labels = map[string]string{LabelManaged: "false", LabelProject: "other", LabelTaskName: "spoof", LabelAttempt: "9"}
			},
			want:   map[string]string{LabelManaged: "true", LabelProject: "proj", LabelAttempt: "2"},
			absent: []string{LabelTaskName},
		},
		{
			name: "pod template labels merged, cannot spoof",
			mutate: func(ta *flytev1.TaskAction) {
				ta.Spec.TaskTemplate.PodTemplate = &flytev1.PodTemplate{Labels: map[string]string{"team": "infra", "extra": "1", LabelManaged: "no", LabelRun: "x"}}
			},
			want: map[string]string{"team": "infra", "extra": "1", LabelManaged: "true", LabelRun: "run1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			tc.mutate(ta)
			pod := build(t, ta, 2, plugin.Settings{})
			for k, v := range tc.want {
				if got, ok := pod.Labels[k]; !ok || got != v {
					t.Errorf("label %s = %q (present %v), want %q", k, got, ok, v)
				}
			}
			for _, k := range tc.absent {
				if v, ok := pod.Labels[k]; ok {
					t.Errorf("label %s = %q, want absent", k, v)
				}
			}
		})
	}
}

func TestAnnotations(t *testing.T) {
	ta := testTA()
	ta.Annotations = map[string]string{
		"note": "ta", "kubectl.kubernetes.io/last-applied-configuration": "{...}",
		AnnotationSecretPrefix + "0": "spoof/spoof/FILE", AnnotationPrimaryContainer: "spoof",
	}
	ta.Spec.TaskTemplate.PodTemplate = &flytev1.PodTemplate{Annotations: map[string]string{"note": "template", "other": "x", AnnotationSecretPrefix + "7": "spoof"}}
	ta.Spec.TaskTemplate.SecurityContext = &flytev1.SecurityContext{Secrets: []flytev1.Secret{
		{Group: "aws", Key: "token", MountRequirement: flytev1.MountEnvVar},
		{Key: "pw"},
	}}
	pod := build(t, ta, 1, plugin.Settings{})
	want := map[string]string{
		"note": "template", "other": "x",
		AnnotationPrimaryContainer: "task",
	}
	for k, v := range secrets.Annotations([]secrets.Request{
		{Group: "aws", Key: "token", Mount: secrets.MountEnvVar},
		{Key: "pw", Mount: secrets.MountAny},
	}) {
		want[k] = v
	}
	if !reflect.DeepEqual(pod.Annotations, want) {
		t.Errorf("annotations = %v\nwant %v", pod.Annotations, want)
	}
	if pod.Labels[secrets.PodLabel] != secrets.PodLabelValue {
		t.Errorf("labels %v: a pod with secrets must be selected for the secret webhook", pod.Labels)
	}

	// Without secrets the pod is not selected, whatever the TaskAction's labels say.
	ta = testTA()
	ta.Labels = map[string]string{secrets.PodLabel: secrets.PodLabelValue}
	if pod := build(t, ta, 1, plugin.Settings{}); pod.Labels[secrets.PodLabel] != "" {
		t.Errorf("labels %v: a pod without secrets selected for the secret webhook", pod.Labels)
	}
}

func envOf(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			v = "<from>"
		}
		out = append(out, e.Name+"="+v)
	}
	return out
}

func TestEnv(t *testing.T) {
	builtins := []string{
		"ACTION_NAME=a0", "RUN_NAME=run1", "FLYTE_ATTEMPT_NUMBER=1", "FLYTE_INTERNAL_EXECUTION_ID=run1",
		"FLYTE_INTERNAL_EXECUTION_PROJECT=proj", "FLYTE_INTERNAL_EXECUTION_DOMAIN=dev",
	}
	cases := []struct {
		name     string
		template []corev1.EnvVar // pod template primary container
		task     []corev1.EnvVar
		envVars  map[string]string
		want     []string
	}{
		{name: "builtins only", want: builtins},
		{
			name:    "envVars sorted, cannot override builtins",
			envVars: map[string]string{"ZED": "z", "ACTION_NAME": "spoof", "ALPHA": "a", "FLYTE_ATTEMPT_NUMBER": "7", "MID": "m"},
			want:    append(append([]string{}, builtins...), "ALPHA=a", "MID=m", "ZED=z"),
		},
		{
			name:    "task env then envVars; envVars win in place",
			task:    []corev1.EnvVar{{Name: "B", Value: "task"}, {Name: "RUN_NAME", Value: "spoof"}, {Name: "S", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			envVars: map[string]string{"B": "run", "A": "run"},
			want:    append(append([]string{}, builtins...), "B=run", "S=<from>", "A=run"),
		},
		{
			name:     "pod template env first, task overrides",
			template: []corev1.EnvVar{{Name: "T", Value: "t"}, {Name: "B", Value: "template"}, {Name: "ACTION_NAME", Value: "spoof"}},
			task:     []corev1.EnvVar{{Name: "B", Value: "task"}},
			want:     append(append([]string{}, builtins...), "T=t", "B=task"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			ta.Spec.TaskTemplate.Container.Env = tc.task
			ta.Spec.EnvVars = tc.envVars
			if tc.template != nil {
				ta.Spec.TaskTemplate.PodTemplate = &flytev1.PodTemplate{Spec: &corev1.PodSpec{Containers: []corev1.Container{{Name: "task", Env: tc.template}}}}
			}
			for i := 0; i < 5; i++ { // map order must not show
				got := envOf(primaryOf(t, build(t, ta, 2, plugin.Settings{})))
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("env = %q\nwant %q", got, tc.want)
				}
			}
		})
	}
	// FLYTE_ATTEMPT_NUMBER is the 0-based retry number.
	got := envOf(primaryOf(t, build(t, testTA(), 1, plugin.Settings{})))
	if got[2] != "FLYTE_ATTEMPT_NUMBER=0" {
		t.Errorf("attempt 1: %s", got[2])
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
	s := plugin.Settings{DefaultCPU: "500m", DefaultMemory: "1Gi"}
	cases := []struct {
		name                   string
		s                      plugin.Settings
		req, lim               corev1.ResourceList
		wantReq, wantLim       corev1.ResourceList
		templateReq, templateL corev1.ResourceList
	}{
		{name: "nothing set: defaults for both", s: s,
			wantReq: rl("cpu", "500m", "memory", "1Gi"), wantLim: rl("cpu", "500m", "memory", "1Gi")},
		{name: "nothing set, no defaults", s: plugin.Settings{}},
		{name: "request only: limit copies it", s: s, req: rl("cpu", "2", "memory", "3Gi"),
			wantReq: rl("cpu", "2", "memory", "3Gi"), wantLim: rl("cpu", "2", "memory", "3Gi")},
		{name: "limit only: request copies it", s: s, lim: rl("cpu", "4", "memory", "8Gi"),
			wantReq: rl("cpu", "4", "memory", "8Gi"), wantLim: rl("cpu", "4", "memory", "8Gi")},
		{name: "both set: kept", s: s, req: rl("cpu", "1", "memory", "1Gi"), lim: rl("cpu", "2", "memory", "2Gi"),
			wantReq: rl("cpu", "1", "memory", "1Gi"), wantLim: rl("cpu", "2", "memory", "2Gi")},
		{name: "mixed: cpu request, memory limit", s: s, req: rl("cpu", "1"), lim: rl("memory", "2Gi"),
			wantReq: rl("cpu", "1", "memory", "2Gi"), wantLim: rl("cpu", "1", "memory", "2Gi")},
		{name: "cpu set, memory defaulted", s: s, req: rl("cpu", "1"),
			wantReq: rl("cpu", "1", "memory", "1Gi"), wantLim: rl("cpu", "1", "memory", "1Gi")},
		{name: "other resources untouched", s: s, lim: rl("nvidia.com/gpu", "1"),
			wantReq: rl("cpu", "500m", "memory", "1Gi"), wantLim: rl("cpu", "500m", "memory", "1Gi", "nvidia.com/gpu", "1")},
		{name: "pod template resources as base, task wins", s: s,
			templateReq: rl("cpu", "3", "ephemeral-storage", "1Gi"), templateL: rl("memory", "4Gi"),
			req:     rl("cpu", "1"),
			wantReq: rl("cpu", "1", "memory", "4Gi", "ephemeral-storage", "1Gi"), wantLim: rl("cpu", "1", "memory", "4Gi")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			ta.Spec.TaskTemplate.Container.Resources = corev1.ResourceRequirements{Requests: tc.req, Limits: tc.lim}
			if tc.templateReq != nil || tc.templateL != nil {
				ta.Spec.TaskTemplate.PodTemplate = &flytev1.PodTemplate{Spec: &corev1.PodSpec{Containers: []corev1.Container{{
					Name: "task", Resources: corev1.ResourceRequirements{Requests: tc.templateReq, Limits: tc.templateL}}}}}
			}
			r := primaryOf(t, build(t, ta, 1, tc.s)).Resources
			if !equality.Semantic.DeepEqual(r.Requests, tc.wantReq) && !(len(r.Requests) == 0 && len(tc.wantReq) == 0) {
				t.Errorf("requests = %v, want %v", r.Requests, tc.wantReq)
			}
			if !equality.Semantic.DeepEqual(r.Limits, tc.wantLim) && !(len(r.Limits) == 0 && len(tc.wantLim) == 0) {
				t.Errorf("limits = %v, want %v", r.Limits, tc.wantLim)
			}
		})
	}
}

func TestServiceAccount(t *testing.T) {
	runAs := &flytev1.SecurityContext{RunAs: &flytev1.RunAs{K8sServiceAccount: "runner"}}
	cases := []struct {
		name     string
		sc       *flytev1.SecurityContext
		template string
		def      string
		want     string
	}{
		{name: "runAs wins", sc: runAs, template: "tmpl", def: "dflt", want: "runner"},
		{name: "executor default", def: "dflt", want: "dflt"},
		{name: "empty runAs falls back", sc: &flytev1.SecurityContext{RunAs: &flytev1.RunAs{}}, def: "dflt", want: "dflt"},
		{name: "none: namespace default", want: ""},
		{name: "pod template over executor default", template: "tmpl", def: "dflt", want: "tmpl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			ta.Spec.TaskTemplate.SecurityContext = tc.sc
			if tc.template != "" {
				ta.Spec.TaskTemplate.PodTemplate = &flytev1.PodTemplate{Spec: &corev1.PodSpec{ServiceAccountName: tc.template}}
			}
			if got := build(t, ta, 1, plugin.Settings{DefaultServiceAccount: tc.def}).Spec.ServiceAccountName; got != tc.want {
				t.Errorf("serviceAccountName = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTemplating(t *testing.T) {
	cases := []struct {
		name    string
		attempt int32
		mutate  func(*flytev1.TaskAction)
		in      string
		want    string
		errs    []string // the error must mention each
	}{
		{name: "input", attempt: 1, in: "{{.input}}", want: "s3://bucket/run1/a0/inputs.pb"},
		{name: "case and spaces", attempt: 1, in: "{{ .Input }}|{{.INPUT}}|{{  .iNpUt  }}|{{$input}}", want: strings.Repeat("s3://bucket/run1/a0/inputs.pb|", 3) + "s3://bucket/run1/a0/inputs.pb"},
		{name: "inputPrefix", attempt: 1, in: "{{.inputPrefix}}", want: "s3://bucket/run1/a0"},
		{name: "inputPrefix of another file name", attempt: 1, mutate: func(ta *flytev1.TaskAction) { ta.Spec.InputURI = "gs://b/x/in.bin" }, in: "{{.InputPrefix}}", want: "gs://b/x"},
		{name: "outputPrefix trims base slash", attempt: 1, in: "{{.outputPrefix}}", want: "s3://bucket/run1/a0/1"},
		{name: "outputPrefix attempt 2", attempt: 2, in: "{{ .OutputPrefix }}", want: "s3://bucket/run1/a0/2"},
		{name: "rawOutputDataPrefix", attempt: 1, in: "{{.rawOutputDataPrefix}}", want: "s3://bucket/run1/a0/1/raw"},
		{name: "checkpointOutputPrefix", attempt: 3, in: "{{.checkpointOutputPrefix}}", want: "s3://bucket/run1/a0/3/_flytecheckpoints"},
		{name: "prevCheckpointPrefix attempt 1 is empty", attempt: 1, in: "{{.prevCheckpointPrefix}}", want: ""},
		{name: "prevCheckpointPrefix attempt 2", attempt: 2, in: "{{.prevCheckpointPrefix}}", want: "s3://bucket/run1/a0/1/_flytecheckpoints"},
		{name: "perRetryUniqueKey", attempt: 2, in: "{{.perRetryUniqueKey}}", want: "act_1"},
		{name: "namespace", attempt: 1, in: "ns={{.namespace}}", want: "ns=ns"},
		{name: "several in one string", attempt: 1, in: "--in={{.input}} --out={{.outputPrefix}}", want: "--in=s3://bucket/run1/a0/inputs.pb --out=s3://bucket/run1/a0/1"},
		{name: "no placeholder", attempt: 1, in: "plain {not} {{", want: "plain {not} {{"},
		{name: "unknown placeholder", attempt: 1, in: "{{.nosuchthing}} {{ .Inputs.x }} {{foo}}", errs: []string{"{{.nosuchthing}}", "{{ .Inputs.x }}", "{{foo}}"}},
		{name: "taskTemplatePath is unknown", attempt: 1, in: "{{.taskTemplatePath}}", errs: []string{"taskTemplatePath"}},
		{name: "output without base", attempt: 1, mutate: func(ta *flytev1.TaskAction) { ta.Spec.RunOutputBase = "" }, in: "{{.outputPrefix}}", errs: []string{"runOutputBase is empty"}},
		{name: "input without inputUri", attempt: 1, mutate: func(ta *flytev1.TaskAction) { ta.Spec.InputURI = "" }, in: "{{.input}}", errs: []string{"inputUri is empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := testTA()
			if tc.mutate != nil {
				tc.mutate(ta)
			}
			ta.Spec.TaskTemplate.Container.Command = []string{"run", tc.in}
			ta.Spec.TaskTemplate.Container.Args = []string{tc.in}
			pod, err := BuildPod(plugin.TaskContext{TaskAction: ta, Attempt: tc.attempt})
			if len(tc.errs) > 0 {
				for _, e := range tc.errs {
					wantBadSpec(t, err, e)
				}
				return
			}
			if err != nil {
				t.Fatalf("BuildPod: %v", err)
			}
			c := pod.Spec.Containers[0]
			if c.Command[1] != tc.want || c.Args[0] != tc.want {
				t.Errorf("command %q args %q, want %q", c.Command, c.Args, tc.want)
			}
		})
	}
}

func TestOutputHelpers(t *testing.T) {
	ta := testTA()
	if got := task.OutputPrefix(ta, 2); got != "s3://bucket/run1/a0/2" {
		t.Errorf("OutputPrefix = %q", got)
	}
	if got := task.OutputURI(ta, 1); got != "s3://bucket/run1/a0/1/outputs.pb" {
		t.Errorf("OutputURI = %q", got)
	}
	ta.Spec.RunOutputBase = ""
	if task.OutputPrefix(ta, 1) != "" || task.OutputURI(ta, 1) != "" {
		t.Errorf("no base: want empty")
	}
	for in, want := range map[string]string{
		"s3://b/p/inputs.pb": "s3://b/p", "s3://b/inputs.pb": "s3://b", "/tmp/x/in.pb": "/tmp/x", "s3://bucket": "s3://bucket", "s3://b/p/": "s3://b/p",
	} {
		if got := task.InputPrefix(in); got != want {
			t.Errorf("InputPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPodTemplateMerge(t *testing.T) {
	grace := int64(5)
	ta := testTA()
	ta.Spec.TaskTemplate.Container.Env = []corev1.EnvVar{{Name: "TASK", Value: "1"}}
	ta.Spec.TaskTemplate.Container.Resources.Limits = rl("memory", "2Gi")
	ta.Spec.TaskTemplate.PodTemplate = &flytev1.PodTemplate{
		PrimaryContainerName: "main",
		Spec: &corev1.PodSpec{
			NodeSelector:                  map[string]string{"pool": "gpu"},
			Tolerations:                   []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
			Affinity:                      &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}},
			Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			SecurityContext:               &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)},
			SchedulerName:                 "custom",
			PriorityClassName:             "high",
			ImagePullSecrets:              []corev1.LocalObjectReference{{Name: "regcred"}},
			TerminationGracePeriodSeconds: &grace,
			InitContainers:                []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers: []corev1.Container{
				{Name: "sidecar", Image: "envoy"},
				{
					Name: "main", Image: "ignored", Command: []string{"ignored"}, WorkingDir: "/work",
					Env:          []corev1.EnvVar{{Name: "TMPL", Value: "1"}},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					Resources:    corev1.ResourceRequirements{Requests: rl("cpu", "1")},
				},
			},
		},
	}
	orig := ta.DeepCopy()
	pod := build(t, ta, 1, plugin.Settings{})
	if !equality.Semantic.DeepEqual(ta, orig) {
		t.Errorf("BuildPod modified the pod template")
	}
	s := pod.Spec
	if s.NodeSelector["pool"] != "gpu" || len(s.Tolerations) != 1 || s.Affinity == nil || len(s.Volumes) != 1 ||
		s.SecurityContext == nil || s.SchedulerName != "custom" || s.PriorityClassName != "high" ||
		len(s.ImagePullSecrets) != 1 || s.TerminationGracePeriodSeconds == nil || *s.TerminationGracePeriodSeconds != 5 {
		t.Errorf("pod-level fields not taken from the template: %+v", s)
	}
	if len(s.InitContainers) != 1 || s.InitContainers[0].Name != "init" {
		t.Errorf("init containers = %v", s.InitContainers)
	}
	if len(s.Containers) != 2 || s.Containers[0].Name != "sidecar" || s.Containers[0].Image != "envoy" || s.Containers[1].Name != "main" {
		t.Fatalf("containers = %v", s.Containers)
	}
	if pod.Annotations[AnnotationPrimaryContainer] != "main" {
		t.Errorf("primary annotation = %q", pod.Annotations[AnnotationPrimaryContainer])
	}
	m := s.Containers[1]
	if m.Image != "python:3.12" || !reflect.DeepEqual(m.Command, []string{"python"}) || m.WorkingDir != "/work" {
		t.Errorf("primary = %+v", m)
	}
	if len(m.VolumeMounts) != 1 || m.VolumeMounts[0].MountPath != "/data" {
		t.Errorf("volume mounts = %v", m.VolumeMounts)
	}
	env := envOf(m)
	if env[len(env)-2] != "TMPL=1" || env[len(env)-1] != "TASK=1" {
		t.Errorf("env = %q", env)
	}
	if !equality.Semantic.DeepEqual(m.Resources.Requests, rl("cpu", "1", "memory", "2Gi")) || !equality.Semantic.DeepEqual(m.Resources.Limits, rl("cpu", "1", "memory", "2Gi")) {
		t.Errorf("resources = %+v", m.Resources)
	}
	if m.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("terminationMessagePolicy = %q", m.TerminationMessagePolicy)
	}
	if s.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %q", s.RestartPolicy)
	}

	// Without a container of the primary name the task container comes first;
	// template choices for restartPolicy and service links are kept.
	ta = testTA()
	ta.Spec.TaskTemplate.PodTemplate = &flytev1.PodTemplate{Spec: &corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyOnFailure, EnableServiceLinks: ptr(true),
		Containers: []corev1.Container{{Name: "sidecar", Image: "envoy"}},
	}}
	pod = build(t, ta, 1, plugin.Settings{})
	if len(pod.Spec.Containers) != 2 || pod.Spec.Containers[0].Name != "task" || pod.Spec.Containers[1].Name != "sidecar" {
		t.Errorf("containers = %v", pod.Spec.Containers)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyOnFailure || !*pod.Spec.EnableServiceLinks {
		t.Errorf("template restartPolicy/enableServiceLinks not kept")
	}

	// The image may come from the template when the task leaves it empty.
	ta = testTA()
	ta.Spec.TaskTemplate.Container.Image = ""
	ta.Spec.TaskTemplate.PodTemplate = &flytev1.PodTemplate{Spec: &corev1.PodSpec{Containers: []corev1.Container{{Name: "task", Image: "from-template"}}}}
	if got := build(t, ta, 1, plugin.Settings{}).Spec.Containers[0].Image; got != "from-template" {
		t.Errorf("image = %q", got)
	}
}

func ptr[T any](v T) *T { return &v }
