package task

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	flytev1 "github.com/taskaction/executor/api/v1"
)

func typedTA(mutate func(*flytev1.TaskAction)) *flytev1.TaskAction {
	ta := &flytev1.TaskAction{Spec: flytev1.TaskActionSpec{
		RunName: "r1", Project: "p", Domain: "d", ActionName: "a0", TaskType: "container",
		RunOutputBase: "s3://b/r1",
		Template: &flytev1.TypedTaskTemplate{
			ID:        flytev1.TaskID{Name: "hello", Version: "v1"},
			Container: &flytev1.Container{Image: "busybox", Command: []string{"echo"}},
		},
	}}
	if mutate != nil {
		mutate(ta)
	}
	return ta
}

func podDoc(raw string) *flytev1.PodSpecDocument { return &flytev1.PodSpecDocument{Raw: []byte(raw)} }

// wantFieldErr checks that err is a *FieldError on field whose reason contains reason.
func wantFieldErr(t *testing.T, err error, field, reason string) {
	t.Helper()
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v (%T), want a *FieldError on %s", err, err, field)
	}
	if fe.Field != field || !strings.Contains(fe.Reason, reason) {
		t.Errorf("error = %q, want field %q with a reason containing %q", fe.Error(), field, reason)
	}
}

func TestFromTaskActionTyped(t *testing.T) {
	tt := typedTA(func(ta *flytev1.TaskAction) {
		tpl := ta.Spec.Template
		tpl.Retries, tpl.Timeout, tpl.CacheSerializable = 2, ptr.To("1h30m"), true
		tpl.Container.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
		tpl.SecurityContext = &flytev1.SecurityContext{RunAs: &flytev1.RunAs{K8sServiceAccount: "runner"},
			Secrets: []flytev1.Secret{{Group: "g", Key: "k"}, {Key: "k2", MountRequirement: flytev1.MountFile, EnvVar: "X"}}}
		tpl.PodTemplate = &flytev1.PodTemplate{Labels: map[string]string{"l": "1"}, PrimaryContainerName: "main",
			Spec: podDoc(`{"containers":[{"name":"main","volumeMounts":[{"name":"v","mountPath":"/v"}]}],"volumes":[{"name":"v","emptyDir":{}}]}`)}
		ta.Spec.Interruptible = ptr.To(true)
		ta.Spec.CacheKey = "k1"
	})
	got, err := FromTaskAction(tt)
	if err != nil {
		t.Fatal(err)
	}
	if got.Form != FormTyped || got.Type != "container" || got.Retries != 2 || got.MaxAttempts() != 3 || got.Timeout != 90*time.Minute ||
		!got.Interruptible || !got.Cache.Serializable || !got.Cache.Enabled || got.ServiceAccount != "runner" || got.PrimaryContainerName != "main" {
		t.Errorf("task = %+v", got)
	}
	if got.ID != (Identifier{Project: "p", Domain: "d", Name: "hello", Version: "v1"}) {
		t.Errorf("id = %+v", got.ID)
	}
	if len(got.Secrets) != 2 || got.Secrets[0].Mount != MountAny || got.Secrets[1] != (Secret{Key: "k2", Mount: MountFile, EnvVar: "X"}) {
		t.Errorf("secrets = %+v", got.Secrets)
	}
	if got.PodSpec == nil || len(got.PodSpec.Containers) != 1 || got.PodSpec.Containers[0].VolumeMounts[0].MountPath != "/v" || got.PodLabels["l"] != "1" {
		t.Errorf("pod spec = %+v", got.PodSpec)
	}
	if q := got.Container.Resources.Limits[corev1.ResourceCPU]; q.String() != "2" {
		t.Errorf("resources = %+v", got.Container.Resources)
	}
	if plain, err := FromTaskAction(typedTA(nil)); err != nil || plain.PrimaryContainerName != DefaultTypedPrimaryContainerName || plain.Timeout != 0 || plain.Cache.Enabled {
		t.Errorf("plain task = %+v, %v", plain, err)
	}
}

func TestFromTaskActionTypedErrors(t *testing.T) {
	for _, tc := range []struct {
		name          string
		mutate        func(*flytev1.TaskAction)
		field, reason string
	}{
		{"no template at all", func(ta *flytev1.TaskAction) { ta.Spec.Template = nil }, "spec.taskTemplate", "is required"},
		{"both forms", func(ta *flytev1.TaskAction) { ta.Spec.TaskTemplate = []byte{1} }, "spec", "exactly one"},
		{"timeout in days", func(ta *flytev1.TaskAction) { ta.Spec.Template.Timeout = ptr.To("1d") }, "spec.template.timeout", `unknown unit "d"`},
		{"negative timeout", func(ta *flytev1.TaskAction) { ta.Spec.Template.Timeout = ptr.To("-5s") }, "spec.template.timeout", "must not be negative"},
		{"timeout too large", func(ta *flytev1.TaskAction) { ta.Spec.Template.Timeout = ptr.To("9999999999h") }, "spec.template.timeout", "invalid duration"},
		{"empty timeout", func(ta *flytev1.TaskAction) { ta.Spec.Template.Timeout = ptr.To("") }, "spec.template.timeout", "Go duration"},
		{"negative retries", func(ta *flytev1.TaskAction) { ta.Spec.Template.Retries = -1 }, "spec.template.retries", "negative"},
		{"no container, no pod spec", func(ta *flytev1.TaskAction) { ta.Spec.Template.Container = nil }, "spec.template.container", "is required"},
		{"no image", func(ta *flytev1.TaskAction) { ta.Spec.Template.Container.Image = "" }, "spec.template.container.image", "is required"},
		{"bad mount requirement", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.SecurityContext = &flytev1.SecurityContext{Secrets: []flytev1.Secret{{Key: "k"}, {Key: "k", MountRequirement: "DISK"}}}
		}, "spec.template.securityContext.secrets[1].mountRequirement", `got "DISK"`},
		{"secret without key", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.SecurityContext = &flytev1.SecurityContext{Secrets: []flytev1.Secret{{Group: "g"}}}
		}, "spec.template.securityContext.secrets[0].key", "is required"},
		{"containers is an object", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Spec: podDoc(`{"containers":{"name":"x"}}`)}
		}, "spec.template.podTemplate.spec.containers", "must be a list, got a JSON object"},
		{"a container field of the wrong type", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Spec: podDoc(`{"containers":[{"name":"x","args":"--all"}]}`)}
		}, "spec.template.podTemplate.spec.containers.args", "must be a list, got a JSON string"},
		{"a field a pod spec does not have", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Spec: podDoc(`{"containerz":[]}`)}
		}, "spec.template.podTemplate.spec", `unknown field "containerz"`},
		{"a pod spec that is not an object", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Spec: podDoc(`["x"]`)}
		}, "spec.template.podTemplate.spec", "must be a pod spec object"},
		{"a bad quantity in the pod spec", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Spec: podDoc(`{"containers":[{"name":"x","resources":{"limits":{"cpu":"lots"}}}]}`)}
		}, "spec.template.podTemplate.spec.containers[0].resources.limits.cpu", `"lots" is not a Kubernetes quantity`},
		// The exponent would never finish expanding: refused before any parse.
		{"a huge exponent in the pod spec", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Spec: podDoc(`{"containers":[{"name":"x","resources":{"limits":{"cpu":"1e2147483648"}}}]}`)}
		}, "spec.template.podTemplate.spec.containers[0].resources.limits.cpu", "exponent"},
		{"a huge exponent in a pod spec volume", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Spec: podDoc(`{"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1e-2147483648"}}]}`)}
		}, "spec.template.podTemplate.spec.volumes[0].emptyDir.sizeLimit", "exponent"},
		{"no container and no primary in the pod spec", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.Container = nil
			ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Spec: podDoc(`{"containers":[{"name":"main","image":"x"}]}`)}
		}, "spec.template.podTemplate.primaryContainerName", `names container "task", which the pod spec does not have`},
		{"run output base not a URL", func(ta *flytev1.TaskAction) { ta.Spec.RunOutputBase = "s3://b/%zz" }, "spec.runOutputBase", "is not a URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromTaskAction(typedTA(tc.mutate))
			wantFieldErr(t, err, tc.field, tc.reason)
		})
	}
}

func TestPodSpecDocumentRoundTrip(t *testing.T) {
	// Whatever JSON is stored, the Go type reads it back unchanged; only the
	// decoder judges it.
	for _, raw := range []string{`{"containers":{"name":"x"}}`, `{"a":1}`, `[1,2]`, `"str"`} {
		var d flytev1.PodSpecDocument
		if err := d.UnmarshalJSON([]byte(raw)); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		b, _ := d.MarshalJSON()
		if string(b) != raw {
			t.Errorf("round trip of %s = %s", raw, b)
		}
	}
}

// A TaskAction read with values its Go types could not hold (here a quantity
// whose exponent would never finish expanding, in the typed container) fails
// its decode naming each; a status value that did not decode is not the
// task's concern.
func TestFromTaskActionReportsWhatDidNotDecode(t *testing.T) {
	raw := `{"apiVersion":"flyte.org/v1","kind":"TaskAction","metadata":{"name":"x"},
	  "spec":{"runName":"r","project":"p","domain":"d","actionName":"a","taskType":"container",
	    "template":{"container":{"image":"busybox","resources":{"limits":{"cpu":"1e2147483648"},"requests":{"memory":"lots"}}}}},
	  "status":{"attempts":-1}}`
	ta := &flytev1.TaskAction{}
	if err := json.Unmarshal([]byte(raw), ta); err != nil {
		t.Fatal(err)
	}
	_, err := FromTaskAction(ta)
	wantFieldErr(t, err, "spec.template.container.resources.limits.cpu", "exponent")
	if err == nil || !strings.Contains(err.Error(), "spec.template.container.resources.requests.memory") || strings.Contains(err.Error(), "status") {
		t.Errorf("error %v: want both quantities named, and not the status", err)
	}

	raw = strings.Replace(raw, `"limits":{"cpu":"1e2147483648"},"requests":{"memory":"lots"}`, `"limits":{"cpu":"1"}`, 1)
	ta = &flytev1.TaskAction{}
	if err := json.Unmarshal([]byte(raw), ta); err != nil {
		t.Fatal(err)
	}
	if _, err := FromTaskAction(ta); err != nil || ta.DecodeError() == nil {
		t.Errorf("only status undecodable: FromTaskAction = %v, DecodeError = %v", err, ta.DecodeError())
	}
}
