package envtest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// withoutValidation replaces the TaskAction CRD's schema of spec.template by
// one without rules (an older CRD, or a cluster where validation was skipped)
// for the duration of store, then puts the real CRD back.
func withoutValidation(t *testing.T, store func()) {
	t.Helper()
	ctx := context.Background()
	s := k8s.Scheme()
	_ = apiextensionsv1.AddToScheme(s)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "taskactions.flyte.org"}, crd); err != nil {
		t.Fatal(err)
	}
	original := crd.DeepCopy()
	loose := crd.DeepCopy()
	preserve := true
	for i := range loose.Spec.Versions {
		spec := loose.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
		spec.XValidations = nil
		spec.Properties["template"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}
		loose.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	if err := k8s.Update(ctx, loose); err != nil {
		t.Fatalf("loosen the CRD: %v", err)
	}
	defer func() {
		cur := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: crd.Name}, cur); err != nil {
			t.Fatal(err)
		}
		cur.Spec = original.Spec
		if err := k8s.Update(ctx, cur); err != nil {
			t.Fatalf("restore the CRD: %v", err)
		}
	}()
	store()
}

// TestPoisonPill is issue 10, item 1: objects the Go types could not decode
// (a timeout of "1d", a pod template whose containers are an object) got in
// through a CRD without the rules; the executor keeps reading TaskActions,
// fails each of them with InvalidSpec naming the field, and runs the others.
func TestPoisonPill(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	bad := map[string]string{
		"bad-timeout": `{"timeout": "1d", "container": {"image": "busybox"}}`,
		"bad-podspec": `{"container": {"image": "busybox"}, "podTemplate": {"spec": {"containers": {"name": "x"}}}}`,
	}
	withoutValidation(t, func() {
		for name, tmpl := range bad {
			good := validTaskAction(ns, name)
			raw, err := json.Marshal(good)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := json.Unmarshal(raw, &u.Object); err != nil {
				t.Fatal(err)
			}
			var tv map[string]any
			if err := json.Unmarshal([]byte(tmpl), &tv); err != nil {
				t.Fatal(err)
			}
			_ = unstructured.SetNestedField(u.Object, tv, "spec", "template")
			u.SetGroupVersionKind(flytev1.GroupVersion.WithKind("TaskAction"))
			var err2 error
			for try := 0; try < 50; try++ { // the loosened schema takes a moment to apply
				if err2 = k8s.Create(ctx, u.DeepCopy()); err2 == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err2 != nil {
				t.Fatalf("store %s through the loose CRD: %v", name, err2)
			}
		}
	})
	// Created after the bad ones: it runs.
	create(t, validTaskAction(ns, "good"))
	pod := waitPod(t, ns, "good-0")
	waitReason(t, ns, "good", flytev1.ConditionProgressing, flytev1.ReasonQueued)
	setPodStatus(t, pod, podTerminated(pod, corev1.PodSucceeded, 0, "Completed", ""))
	waitReason(t, ns, "good", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	for name, field := range map[string]string{"bad-timeout": "spec.template.timeout", "bad-podspec": "spec.template.podTemplate.spec"} {
		got := waitReason(t, ns, name, flytev1.ConditionFailed, flytev1.ReasonInvalidSpec)
		if c := meta.FindStatusCondition(got.Status.Conditions, flytev1.ConditionFailed); !strings.Contains(c.Message, field) {
			t.Errorf("%s: message %q does not name %s", name, c.Message, field)
		}
	}
}
