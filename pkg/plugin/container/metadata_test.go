package container

import (
	"encoding/base32"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

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
