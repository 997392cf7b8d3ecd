package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/secrets"
	"github.com/taskaction/executor/pkg/setup"
	"github.com/taskaction/executor/pkg/webhook"
)

const secretValue = "s3cr3t-value-never-in-a-pod"

func podAsking(ns, name string, labelled bool, reqs ...secrets.Request) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: secrets.Annotations(reqs)},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "task", Image: "busybox"}},
		},
	}
	if labelled {
		p.Labels = map[string]string{secrets.PodLabel: secrets.PodLabelValue}
	}
	return p
}

func envOf(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func TestAdmissionWithTheWebhookUp(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	startWebhook(t, webhookConfig(), setup.Options{})
	ns := testenv.Namespace(t, c, "wh-")
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db-creds", Namespace: ns},
		StringData: map[string]string{"password": secretValue, "ca.crt": secretValue},
	}); err != nil {
		t.Fatal(err)
	}
	envSecret := secrets.Request{Group: "db-creds", Key: "password", Mount: secrets.MountEnvVar, EnvVar: "DB_PASSWORD"}
	fileSecret := secrets.Request{Group: "db-creds", Key: "ca.crt", Mount: secrets.MountFile}

	t.Run("a labelled pod gets references, not values", func(t *testing.T) {
		pod := podAsking(ns, "labelled", true, envSecret, fileSecret)
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			t.Fatal(err)
		}
		for _, ctr := range append(got.Spec.InitContainers, got.Spec.Containers...) {
			for _, name := range []string{"_FSEC_DB-CREDS_PASSWORD", "DB_PASSWORD"} {
				e := envOf(ctr, name)
				if e == nil || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
					e.ValueFrom.SecretKeyRef.Name != "db-creds" || e.ValueFrom.SecretKeyRef.Key != "password" {
					t.Errorf("container %s: %s = %+v, want a reference to db-creds/password", ctr.Name, name, e)
				}
			}
			if e := envOf(ctr, secrets.EnvDefaultDir); e == nil || e.Value != "/etc/flyte/secrets" {
				t.Errorf("container %s: %s = %+v", ctr.Name, secrets.EnvDefaultDir, e)
			}
			if len(ctr.VolumeMounts) != 1 || ctr.VolumeMounts[0].MountPath != "/etc/flyte/secrets/db-creds" {
				t.Errorf("container %s mounts %+v", ctr.Name, ctr.VolumeMounts)
			}
		}
		if len(got.Spec.Volumes) != 1 || got.Spec.Volumes[0].Secret == nil || got.Spec.Volumes[0].Secret.SecretName != "db-creds" ||
			len(got.Spec.Volumes[0].Secret.Items) != 1 || got.Spec.Volumes[0].Secret.Items[0].Key != "ca.crt" {
			t.Errorf("volumes %+v, want the ca.crt key of Secret db-creds", got.Spec.Volumes)
		}
		raw, _ := json.Marshal(got)
		if strings.Contains(string(raw), secretValue) {
			t.Errorf("the secret's value is in the pod: %s", raw)
		}
	})

	t.Run("an unlabelled pod is untouched", func(t *testing.T) {
		pod := podAsking(ns, "unlabelled", false, envSecret, fileSecret)
		want := pod.Spec.DeepCopy()
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Volumes) != 0 || len(got.Spec.Containers[0].Env) != 0 || len(got.Spec.InitContainers[0].Env) != 0 ||
			got.Spec.Containers[0].Image != want.Containers[0].Image {
			t.Errorf("unlabelled pod changed: %+v", got.Spec)
		}
	})

	t.Run("a request that cannot be served refuses the pod, naming it", func(t *testing.T) {
		pod := podAsking(ns, "unservable", true, secrets.Request{Group: "Bad_Name", Key: "k", Mount: secrets.MountEnvVar})
		err := c.Create(ctx, pod)
		if err == nil || !strings.Contains(err.Error(), `group "Bad_Name"`) {
			t.Errorf("create: %v, want a refusal naming the group", err)
		}
		pod = podAsking(ns, "undecodable", true)
		pod.Annotations = map[string]string{secrets.AnnotationPrefix + "0": "not base32!"}
		if err := c.Create(ctx, pod); err == nil || !strings.Contains(err.Error(), "annotation flyte.secrets/s0") {
			t.Errorf("create: %v, want a refusal naming the annotation", err)
		}
	})

	t.Run("a TaskAction has the finalizer at creation", func(t *testing.T) {
		ta := taskAction(ns, "with-webhook")
		if err := c.Create(ctx, ta); err != nil {
			t.Fatal(err)
		}
		// The create's own response is the stored object: the finalizer came
		// with the create, not with a later write.
		if !slices.Contains(ta.Finalizers, flytev1.Finalizer) || ta.Generation != 1 {
			t.Errorf("finalizers %v (generation %d), want %s at creation", ta.Finalizers, ta.Generation, flytev1.Finalizer)
		}
		other := taskAction(ns, "own-finalizer")
		other.Finalizers = []string{"example.com/keep"}
		if err := c.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(other.Finalizers, []string{"example.com/keep", flytev1.Finalizer}) {
			t.Errorf("finalizers %v", other.Finalizers)
		}
	})

	t.Run("a TaskAction's create is one admission call, an update of what its pod is built from one validation", func(t *testing.T) {
		mutations, validations := admissionCalls(t, webhook.PathTaskActionDefault), admissionCalls(t, webhook.PathTaskActionValidate)
		ta := taskAction(ns, "one-call")
		if err := c.Create(ctx, ta); err != nil {
			t.Fatal(err)
		}
		if m, v := admissionCalls(t, webhook.PathTaskActionDefault)-mutations, admissionCalls(t, webhook.PathTaskActionValidate)-validations; m != 1 || v != 0 {
			t.Errorf("a create called the mutating webhook %v times and the validating one %v times; want 1 and 0", m, v)
		}
		ta.Labels = map[string]string{"touched": "yes"}
		if err := c.Update(ctx, ta); err != nil {
			t.Fatal(err)
		}
		if m, v := admissionCalls(t, webhook.PathTaskActionDefault)-mutations, admissionCalls(t, webhook.PathTaskActionValidate)-validations; m != 1 || v != 1 {
			t.Errorf("after an update: %v mutating and %v validating calls in all; want 1 and 1", m, v)
		}
		// What a deletion writes (the finalizer's release) changes nothing a
		// pod is built from: the API server does not call.
		ta.Finalizers = append(ta.Finalizers, "example.com/other")
		if err := c.Update(ctx, ta); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, ta); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(ta), ta); err != nil {
			t.Fatal(err)
		}
		ta.Finalizers = nil
		if err := c.Update(ctx, ta); err != nil {
			t.Fatal(err)
		}
		if m, v := admissionCalls(t, webhook.PathTaskActionDefault)-mutations, admissionCalls(t, webhook.PathTaskActionValidate)-validations; m != 1 || v != 1 {
			t.Errorf("after finalizer updates and a deletion: %v mutating and %v validating calls in all; want still 1 and 1", m, v)
		}
	})

	t.Run("a TaskAction the executor cannot decode is refused with the field", func(t *testing.T) {
		cases := []struct {
			name string
			set  func(tt map[string]any)
			want string
		}{
			{"timeout in days", func(tt map[string]any) { tt["timeout"] = "1d" }, "spec.template.timeout"},
			{"pod spec not a pod spec", func(tt map[string]any) {
				tt["podTemplate"] = map[string]any{"spec": map[string]any{"containers": map[string]any{"name": "x"}}}
			}, "spec.template.podTemplate.spec"},
			{"resource not a quantity", func(tt map[string]any) {
				tt["container"].(map[string]any)["resources"] = map[string]any{"requests": map[string]any{"cpu": "lots"}}
			}, "spec.template.container.resources"},
		}
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				u := unstructuredTaskAction(t, taskAction(ns, fmt.Sprintf("bad-%d", i)))
				tc.set(u.Object["spec"].(map[string]any)["template"].(map[string]any))
				err := c.Create(ctx, u)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("create: %v, want a refusal naming %s", err, tc.want)
				}
			})
		}
	})
}

func unstructuredTaskAction(t *testing.T, ta *flytev1.TaskAction) *unstructured.Unstructured {
	t.Helper()
	ta.APIVersion, ta.Kind = flytev1.GroupVersion.String(), "TaskAction"
	raw, err := json.Marshal(ta)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestExtraValidatorRefusesAtApply(t *testing.T) {
	ctx := context.Background()
	startWebhook(t, webhookConfig(), setup.Options{Webhook: webhook.Options{ValidateTaskAction: func(ta *flytev1.TaskAction) error {
		if ta.Spec.Project == "forbidden" {
			return errors.New("project forbidden is not served here")
		}
		return nil
	}}})
	ns := testenv.Namespace(t, env.Client, "whx-")
	ta := taskAction(ns, "extra")
	ta.Spec.Project = "forbidden"
	if err := env.Client.Create(ctx, ta); err == nil || !strings.Contains(err.Error(), "project forbidden is not served here") {
		t.Errorf("create: %v, want the extra validator's message", err)
	}
	if err := env.Client.Create(ctx, taskAction(ns, "fine")); err != nil {
		t.Errorf("a valid TaskAction: %v", err)
	}
}

func TestAdmissionWithTheWebhookDown(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := testenv.Namespace(t, c, "whdown-")
	// No server listens on envtest's webhook port now.

	t.Run("a TaskAction is still created (fail open), without the finalizer", func(t *testing.T) {
		ta := taskAction(ns, "no-webhook")
		if err := c.Create(ctx, ta); err != nil {
			t.Fatalf("create with the webhook down: %v", err)
		}
		if len(ta.Finalizers) != 0 {
			t.Errorf("finalizers %v without the webhook", ta.Finalizers)
		}
	})
	t.Run("a pod that needs secrets is not created (fail closed)", func(t *testing.T) {
		pod := podAsking(ns, "needs-secrets", true, secrets.Request{Group: "g", Key: "k", Mount: secrets.MountEnvVar})
		err := c.Create(ctx, pod)
		if err == nil || !strings.Contains(err.Error(), "inject-secrets.pods.executor.flyte.org") {
			t.Errorf("create: %v, want a refusal by the failing webhook", err)
		}
	})
	t.Run("other pods are not affected", func(t *testing.T) {
		if err := c.Create(ctx, podAsking(ns, "plain", false)); err != nil {
			t.Errorf("create an unlabelled pod: %v", err)
		}
	})
}

// admissionCalls is how many admission requests the webhook at path has
// answered in this process (controller-runtime's webhook metrics).
func admissionCalls(t *testing.T, path string) float64 {
	return testenv.CounterTotal(t, "controller_runtime_webhook_requests_total", map[string]string{"webhook": path})
}
