package v1_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/task"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// newNamespace gives each test its own namespace so that names and lists do not collide.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	// envtest runs no namespace controller, so deleting would leave it Terminating; leave it.
	return ns.Name
}

func minimal(ns, name string) *flytev1.TaskAction {
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: flytev1.TaskActionSpec{
			RunName:    "run-1",
			Project:    "flytesnacks",
			Domain:     "development",
			ActionName: "a0",
			Template:   &flytev1.TypedTaskTemplate{Container: &flytev1.Container{Image: "busybox:1.36"}},
		},
	}
}

// sortedJSON is v as JSON with object keys sorted, as the API server returns it.
func sortedJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return b
}

func full(t *testing.T, ns, name string) *flytev1.TaskAction {
	ta := minimal(ns, name)
	ta.Labels = map[string]string{"suite": "api"}
	ta.Spec.ParentActionName = ptr.To("root")
	ta.Spec.ShortName = "say-hello"
	ta.Spec.Group = "g1"
	ta.Spec.ActionType = flytev1.ActionTypeTask
	ta.Spec.TaskType = "container"
	ta.Spec.InputURI = "s3://bucket/run-1/a0/inputs.pb"
	ta.Spec.RunOutputBase = "s3://bucket/run-1/"
	ta.Spec.CacheKey = "k-123"
	ta.Spec.EnvVars = map[string]string{"RUN_ID": "run-1", "_X9": "y"}
	ta.Spec.Interruptible = ptr.To(true)
	ta.Spec.Template = &flytev1.TypedTaskTemplate{
		ID:                flytev1.TaskID{Name: "hello", Version: "v1"},
		Retries:           2,
		Timeout:           ptr.To("1h1m30.5s"),
		CacheSerializable: true,
		Container: &flytev1.Container{
			Image:   "busybox:1.36",
			Command: []string{"sh", "-c"},
			Args:    []string{"echo hello"},
			Env:     []corev1.EnvVar{{Name: "A", Value: "b"}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("500m"),
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				},
				Limits: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("1"),
					corev1.ResourceMemory: resource.MustParse("256Mi"),
				},
			},
		},
		SecurityContext: &flytev1.SecurityContext{
			RunAs: &flytev1.RunAs{K8sServiceAccount: "task-sa"},
			Secrets: []flytev1.Secret{
				{Group: "aws", Key: "access-key", MountRequirement: flytev1.MountEnvVar, EnvVar: "AWS_KEY"},
				{Key: "token", GroupVersion: "2", MountRequirement: flytev1.MountFile},
				{Key: "any", MountRequirement: flytev1.MountAny},
			},
		},
		PodTemplate: &flytev1.PodTemplate{
			Labels:               map[string]string{"team": "ml"},
			Annotations:          map[string]string{"note": "x"},
			PrimaryContainerName: "primary",
			Spec: &flytev1.PodSpecDocument{Raw: sortedJSON(t, &corev1.PodSpec{
				Containers: []corev1.Container{{
					Name:  "primary",
					Image: "busybox:1.36",
					Env:   []corev1.EnvVar{{Name: "FROM_TEMPLATE", Value: "1"}},
				}},
				NodeSelector: map[string]string{"pool": "cpu"},
				Tolerations:  []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}},
			})},
		},
		Config: map[string]string{"k": "v"},
	}
	return ta
}

func TestValidTaskActionsAreAdmittedAndReadBackEqual(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	for _, want := range []*flytev1.TaskAction{minimal(ns, "minimal"), full(t, ns, "full")} {
		t.Run(want.Name, func(t *testing.T) {
			sent := want.DeepCopy()
			if err := env.Client.Create(ctx, sent); err != nil {
				t.Fatalf("create: %v", err)
			}
			var got flytev1.TaskAction
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(want), &got); err != nil {
				t.Fatalf("get: %v", err)
			}
			if !equality.Semantic.DeepEqual(want.Spec, got.Spec) {
				t.Errorf("spec read back differs:\nsent %+v\ngot  %+v", want.Spec, got.Spec)
			}
			if !equality.Semantic.DeepEqual(want.Labels, got.Labels) {
				t.Errorf("labels: sent %v, got %v", want.Labels, got.Labels)
			}
		})
	}
}

func TestStatusIsAdmittedThroughTheSubresource(t *testing.T) {
	ctx := context.Background()
	ta := minimal(newNamespace(t), "status")
	if err := env.Client.Create(ctx, ta); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	ta.Status = flytev1.TaskActionStatus{
		ObservedGeneration: 1,
		Conditions: []metav1.Condition{{
			Type: flytev1.ConditionProgressing, Status: metav1.ConditionTrue,
			Reason: flytev1.ReasonQueued, Message: "queued", LastTransitionTime: now,
		}},
		PhaseHistory: []flytev1.PhaseTransition{{Phase: "Queued", OccurredAt: now}},
		Attempts:     1,
		CacheStatus:  flytev1.CacheMiss,
		ErrorState:   &flytev1.ErrorState{Code: "E1", Kind: flytev1.ErrorKindUser, Message: "m"},
		StartedAt:    &now,
	}
	want := ta.Status.DeepCopy()
	if err := env.Client.Status().Update(ctx, ta); err != nil {
		t.Fatalf("status update: %v", err)
	}
	var got flytev1.TaskAction
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ta), &got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(*want, got.Status) {
		t.Errorf("status read back differs:\nsent %+v\ngot  %+v", *want, got.Status)
	}
}

func TestListTaskActions(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	names := map[string]bool{"l-0": true, "l-1": true, "l-2": true}
	for n := range names {
		ta := minimal(ns, n)
		ta.Labels = map[string]string{"batch": "b"}
		if err := env.Client.Create(ctx, ta); err != nil {
			t.Fatal(err)
		}
	}
	// One outside the label selector must not be listed.
	if err := env.Client.Create(ctx, minimal(ns, "other")); err != nil {
		t.Fatal(err)
	}
	var list flytev1.TaskActionList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"batch": "b"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(names) {
		t.Fatalf("listed %d TaskActions, want %d", len(list.Items), len(names))
	}
	for _, it := range list.Items {
		if !names[it.Name] {
			t.Errorf("unexpected TaskAction %q in list", it.Name)
		}
	}
	var all flytev1.TaskActionList
	if err := env.Client.List(ctx, &all, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != len(names)+1 {
		t.Errorf("listed %d TaskActions in namespace, want %d", len(all.Items), len(names)+1)
	}
}

// assertInvalid checks that the API server rejected the request as Invalid and
// that its message names the field and says what is wrong.
func assertInvalid(t *testing.T, err error, field, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted; want rejection on %s", field)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error, got %v", err)
	}
	if !strings.Contains(err.Error(), field) {
		t.Errorf("message does not name %q: %v", field, err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("message does not say %q: %v", msg, err)
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		found := false
		for _, c := range se.Status().Details.Causes {
			if strings.Contains(c.Field, field) {
				found = true
			}
		}
		if !found {
			t.Errorf("no cause names field %q: %+v", field, se.Status().Details.Causes)
		}
	}
}

func TestMalformedTaskActionsAreRejected(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name   string
		mutate func(*flytev1.TaskAction)
		field  string
		msg    string
	}{
		{"missing project", func(ta *flytev1.TaskAction) { ta.Spec.Project = "" }, "spec.project", "should be at least 1 chars long"},
		{"missing runName", func(ta *flytev1.TaskAction) { ta.Spec.RunName = "" }, "spec.runName", "should be at least 1 chars long"},
		{"negative retries", func(ta *flytev1.TaskAction) { ta.Spec.Template.Retries = -1 }, "spec.template.retries", "should be greater than or equal to 0"},
		{"retries over 100", func(ta *flytev1.TaskAction) { ta.Spec.Template.Retries = 101 }, "spec.template.retries", "should be less than or equal to 100"},
		{"runName over 30 chars", func(ta *flytev1.TaskAction) { ta.Spec.RunName = strings.Repeat("r", 31) }, "spec.runName", "may not be more than 30"},
		{"actionName over 30 chars", func(ta *flytev1.TaskAction) { ta.Spec.ActionName = strings.Repeat("a", 31) }, "spec.actionName", "may not be more than 30"},
		{"bad actionType", func(ta *flytev1.TaskAction) { ta.Spec.ActionType = "loop" }, "spec.actionType", `Unsupported value: "loop"`},
		{"bad mountRequirement", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.SecurityContext = &flytev1.SecurityContext{Secrets: []flytev1.Secret{{Key: "k", MountRequirement: "VOLUME"}}}
		}, "spec.template.securityContext.secrets[0].mountRequirement", `Unsupported value: "VOLUME"`},
		{"container without image", func(ta *flytev1.TaskAction) { ta.Spec.Template.Container.Image = "" }, "spec.template.container.image", "should be at least 1 chars long"},
		{"timeout in days", func(ta *flytev1.TaskAction) { ta.Spec.Template.Timeout = ptr.To("1d") }, "spec.template.timeout",
			"timeout must be a non-negative Go duration such as 90s, 1h30m or 500ms (units ns, us, ms, s, m, h; days are not a unit)"},
		{"negative timeout", func(ta *flytev1.TaskAction) { ta.Spec.Template.Timeout = ptr.To("-5s") }, "spec.template.timeout", "timeout must be a non-negative Go duration"},
		{"timeout without a unit", func(ta *flytev1.TaskAction) { ta.Spec.Template.Timeout = ptr.To("90") }, "spec.template.timeout", "timeout must be a non-negative Go duration"},
		{"empty timeout", func(ta *flytev1.TaskAction) { ta.Spec.Template.Timeout = ptr.To("") }, "spec.template.timeout", "timeout must be a non-negative Go duration"},
		{"pod spec containers not a list", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Spec: &flytev1.PodSpecDocument{Raw: []byte(`{"containers":{"name":"x"}}`)}}
		}, "spec.template.podTemplate.spec.containers", "must be of type array"},
		{"pod spec containers not objects", func(ta *flytev1.TaskAction) {
			ta.Spec.Template.PodTemplate = &flytev1.PodTemplate{Spec: &flytev1.PodSpecDocument{Raw: []byte(`{"initContainers":["x"]}`)}}
		}, "spec.template.podTemplate.spec.initContainers[0]", "must be of type object"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := minimal(ns, fmt.Sprintf("bad-%d", i))
			tc.mutate(ta)
			assertInvalid(t, env.Client.Create(context.Background(), ta), tc.field, tc.msg)
		})
	}
}

func TestMalformedUpdatesAreRejected(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	cases := []struct {
		name   string
		status bool
		mutate func(*flytev1.TaskAction)
		field  string
		msg    string
	}{
		{"runName immutable", false, func(ta *flytev1.TaskAction) { ta.Spec.RunName = "run-2" }, "spec.runName", "runName is immutable"},
		{"actionName immutable", false, func(ta *flytev1.TaskAction) { ta.Spec.ActionName = "a1" }, "spec.actionName", "actionName is immutable"},
		{"bad cacheStatus", true, func(ta *flytev1.TaskAction) { ta.Status.CacheStatus = "MAYBE" }, "status.cacheStatus", `Unsupported value: "MAYBE"`},
		{"bad errorState kind", true, func(ta *flytev1.TaskAction) {
			ta.Status.ErrorState = &flytev1.ErrorState{Code: "E", Kind: "OTHER"}
		}, "status.errorState.kind", `Unsupported value: "OTHER"`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ta := minimal(ns, fmt.Sprintf("upd-%d", i))
			if err := env.Client.Create(ctx, ta); err != nil {
				t.Fatal(err)
			}
			tc.mutate(ta)
			var err error
			if tc.status {
				err = env.Client.Status().Update(ctx, ta)
			} else {
				err = env.Client.Update(ctx, ta)
			}
			assertInvalid(t, err, tc.field, tc.msg)
		})
	}
	// A mutable field still updates, so the immutability rules reject only what they should.
	t.Run("shortName mutable", func(t *testing.T) {
		ta := minimal(ns, "upd-ok")
		if err := env.Client.Create(ctx, ta); err != nil {
			t.Fatal(err)
		}
		ta.Spec.ShortName = "renamed"
		if err := env.Client.Update(ctx, ta); err != nil {
			t.Fatalf("update of a mutable field rejected: %v", err)
		}
	})
}

// The typed client always sends project (no omitempty); an object written by
// hand may omit it entirely, which the schema's required list must catch.
func TestAbsentProjectIsRequired(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": flytev1.GroupVersion.String(),
		"kind":       "TaskAction",
		"metadata":   map[string]any{"name": "no-project", "namespace": newNamespace(t)},
		"spec":       map[string]any{"runName": "r", "domain": "d", "actionName": "a"},
	}}
	assertInvalid(t, env.Client.Create(context.Background(), u), "spec.project", "Required value")
}

// A TaskAction as Flyte's actions service writes it: the serialized template,
// the run's env vars whatever their keys, URIs of any length, an owner
// reference to the parent; and a condition with its serialized spec.
func TestFlyteWrittenTaskActionsAreAdmitted(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	tmpl, err := proto.Marshal(&core.TaskTemplate{
		Id:     &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "flytesnacks", Domain: "development", Name: "wf.fn", Version: "v1"},
		Type:   "python",
		Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "ghcr.io/flyteorg/py:v1", Args: []string{"a0", "{{.input}}"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	long := "s3://bucket/" + strings.Repeat("deep/", 600)
	root := &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: "rxyz-a0", Namespace: ns, Labels: map[string]string{
			"flyte.org/project": "flytesnacks", "flyte.org/domain": "development", "flyte.org/run": "rxyz",
			"flyte.org/action": "a0", "flyte.org/action-type": "task", "flyte.org/is-root": "true",
		}},
		Spec: flytev1.TaskActionSpec{
			RunName: "rxyz", Project: "flytesnacks", Domain: "development", ActionName: "a0",
			TaskType: "python", ShortName: "fn", TaskTemplate: tmpl, CacheKey: "v1",
			InputURI: long + "a0", RunOutputBase: long,
			EnvVars: map[string]string{"my.var": "1", "1STARTS_WITH_DIGIT": "2", "dash-key": "3"},
		},
	}
	if err := env.Client.Create(ctx, root); err != nil {
		t.Fatalf("Flyte's root TaskAction rejected: %v", err)
	}
	bod := true
	cond := &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: "rxyz-c1", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "flyte.org/v1", Kind: "TaskAction", Name: root.Name, UID: root.UID, BlockOwnerDeletion: &bod}}},
		Spec: flytev1.TaskActionSpec{
			RunName: "rxyz", Project: "flytesnacks", Domain: "development", ActionName: "c1", ParentActionName: ptr.To("a0"),
			ActionType: flytev1.ActionTypeCondition, ConditionSpec: []byte{0x0a, 0x03, 'a', 'n', 'y'},
		},
	}
	if err := env.Client.Create(ctx, cond); err != nil {
		t.Fatalf("Flyte's condition TaskAction rejected: %v", err)
	}
	for _, want := range []*flytev1.TaskAction{root, cond} {
		var got flytev1.TaskAction
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(want), &got); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(want.Spec, got.Spec) {
			t.Errorf("%s: spec read back differs:\nsent %+v\ngot  %+v", want.Name, want.Spec, got.Spec)
		}
	}
	// The bytes travel as base64 in JSON, as Flyte's Go type writes them.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(flytev1.GroupVersion.WithKind("TaskAction"))
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(root), u); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedString(u.Object, "spec", "taskTemplate"); s != base64.StdEncoding.EncodeToString(tmpl) {
		t.Errorf("spec.taskTemplate = %q, want the template's base64", s)
	}

	// Standard base64 with '+' and '/' (most real templates have them) is
	// admitted: no CEL rule on spec makes the API server read the bytes as
	// URL-safe base64 (kubernetes/kube-openapi#633).
	both := root.DeepCopy()
	both.ObjectMeta = metav1.ObjectMeta{Name: "rxyz-plus-slash", Namespace: ns}
	both.Spec.TaskTemplate = []byte{0xfb, 0xff, 0xbf, 0xfe}
	if enc := base64.StdEncoding.EncodeToString(both.Spec.TaskTemplate); !strings.ContainsAny(enc, "+/") {
		t.Fatalf("the test's bytes encode as %q, without '+' or '/'", enc)
	}
	if err := env.Client.Create(ctx, both); err != nil {
		t.Errorf("a taskTemplate whose base64 holds '+' and '/' was rejected: %v", err)
	}
	cond2 := cond.DeepCopy()
	cond2.ObjectMeta = metav1.ObjectMeta{Name: "rxyz-c2", Namespace: ns}
	cond2.Spec.ConditionSpec = []byte{0xfb, 0xff, 0xbf}
	if err := env.Client.Create(ctx, cond2); err != nil {
		t.Errorf("a conditionSpec whose base64 holds '+' and '/' was rejected: %v", err)
	}
}

func TestTypedTimeoutsAreAdmitted(t *testing.T) {
	ns := newNamespace(t)
	for i, d := range []string{"0", "90s", "1h30m", ".5s", "1.5h", "300ms", "2us", "1µs", "10ns", "1h0m0.001s"} {
		ta := minimal(ns, fmt.Sprintf("timeout-%d", i))
		ta.Spec.Template.Timeout = ptr.To(d)
		if err := env.Client.Create(context.Background(), ta); err != nil {
			t.Errorf("timeout %q rejected: %v", d, err)
		}
	}
}

// Issue 10's poison pill: with a CRD that checks nothing (an older CRD, or a
// client that got past validation), objects the rules now refuse are stored;
// the typed client still lists every TaskAction, and the decoder fails only
// the bad ones, naming the field.
func TestObjectsAnOlderCRDStoredStillList(t *testing.T) {
	ctx := context.Background()
	crdKey := client.ObjectKey{Name: "taskactions.flyte.org"}
	getCRD := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		if err := env.Client.Get(ctx, crdKey, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	specPath := []string{"spec", "versions", "0", "schema", "openAPIV3Schema", "properties", "spec"}
	setSpecSchema := func(schema map[string]any) {
		u := getCRD()
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		v0 := versions[0].(map[string]any)
		if err := unstructured.SetNestedField(v0, schema, specPath[3:]...); err != nil {
			t.Fatal(err)
		}
		versions[0] = v0
		if err := unstructured.SetNestedSlice(u.Object, versions, "spec", "versions"); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	versions, _, _ := unstructured.NestedSlice(getCRD().Object, "spec", "versions")
	original, _, _ := unstructured.NestedMap(versions[0].(map[string]any), specPath[3:]...)
	setSpecSchema(map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true})
	t.Cleanup(func() {
		setSpecSchema(original)
		// Wait until the rules are back, so that the other tests see them.
		ns := newNamespace(t)
		testenv.Eventually(t, time.Minute, "the CRD's rules to be back", func() bool {
			ta := minimal(ns, "rules-back")
			ta.Spec.Template.Timeout = ptr.To("1d")
			return apierrors.IsInvalid(env.Client.Create(ctx, ta))
		})
	})

	ns := newNamespace(t)
	base := map[string]any{"runName": "r", "project": "p", "domain": "d", "actionName": "a", "taskType": "container",
		"inputUri": "s3://b/i", "runOutputBase": "s3://b/o"}
	objects := map[string]struct {
		template map[string]any
		field    string
	}{
		"old-typed-bytes": {map[string]any{"taskTemplate": map[string]any{"timeout": "1d", "container": map[string]any{"image": "busybox"}}}, "spec.taskTemplate"},
		"days":            {map[string]any{"template": map[string]any{"timeout": "1d", "container": map[string]any{"image": "busybox"}}}, "spec.template.timeout"},
		"containers-map": {map[string]any{"template": map[string]any{"container": map[string]any{"image": "busybox"},
			"podTemplate": map[string]any{"spec": map[string]any{"containers": map[string]any{"name": "x"}}}}}, "spec.template.podTemplate.spec.containers"},
		"good": {map[string]any{"template": map[string]any{"timeout": "90s", "container": map[string]any{"image": "busybox"}}}, ""},
	}
	for name, o := range objects {
		spec := map[string]any{}
		for k, v := range base {
			spec[k] = v
		}
		for k, v := range o.template {
			spec[k] = v
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": flytev1.GroupVersion.String(), "kind": "TaskAction",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
		}}
		testenv.Eventually(t, time.Minute, "the rule-less CRD to admit "+name, func() bool {
			err := env.Client.Create(ctx, u.DeepCopy())
			return err == nil || apierrors.IsAlreadyExists(err)
		})
	}
	var list flytev1.TaskActionList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("the typed client cannot list what was stored: %v", err)
	}
	if len(list.Items) != len(objects) {
		t.Fatalf("listed %d TaskActions, want %d", len(list.Items), len(objects))
	}
	for i := range list.Items {
		ta := &list.Items[i]
		_, err := task.FromTaskAction(ta)
		want := objects[ta.Name].field
		var fe *task.FieldError
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", ta.Name, err)
		case want != "" && (!errors.As(err, &fe) || fe.Field != want):
			t.Errorf("%s: error = %v, want one naming %s", ta.Name, err, want)
		}
	}
}
