package webhook_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/secrets"
	"github.com/taskaction/executor/pkg/setup"
)

// The whole path: a TaskAction that asks for a secret, the executor's pod,
// the webhook's references, and the local node resolving them as a kubelet
// does (it runs the container's command as a process with the pod's env).
func TestTaskSecretsEndToEnd(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := testenv.Namespace(t, c, "whe2e-")
	const value = "hunter2-not-in-the-pod"
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db-creds", Namespace: ns},
		StringData: map[string]string{"password": value},
	}); err != nil {
		t.Fatal(err)
	}

	cfg := webhookConfig()
	cfg.Webhook.Standalone = false // the reconciler too
	cfg.GC.Interval = config.Duration{}
	cfg.RequeueDuration = config.Duration{Duration: time.Second}
	cfg.DefaultCPU, cfg.DefaultMemory = "100m", "64Mi"
	startWebhook(t, cfg, setup.Options{Namespaces: []string{ns}, Recorder: &events.MemoryRecorder{}})

	startNode(t, "local-secrets")

	withSecret := func(name, group, key string, command ...string) *flytev1.TaskAction {
		ta := taskAction(ns, name)
		ta.Spec.Template.Container.Command = command
		ta.Spec.Template.SecurityContext = &flytev1.SecurityContext{Secrets: []flytev1.Secret{
			{Group: group, Key: key, MountRequirement: flytev1.MountEnvVar},
		}}
		return ta
	}
	finished := func(name string) *flytev1.TaskAction {
		var ta *flytev1.TaskAction
		testenv.Eventually(t, 90*time.Second, "TaskAction "+name+" terminal", func() bool {
			ta = testenv.GetTaskAction(t, c, ns, name)
			return meta.IsStatusConditionTrue(ta.Status.Conditions, flytev1.ConditionSucceeded) ||
				meta.IsStatusConditionTrue(ta.Status.Conditions, flytev1.ConditionFailed)
		})
		return ta
	}

	t.Run("the task reads its secret; the pod holds only the reference", func(t *testing.T) {
		// No shell: shells drop variables whose names are not identifiers
		// (the dash of the group), and Flyte's runtime reads os.environ directly.
		ta := withSecret("reads", "db-creds", "password", "awk",
			// Upper-cased, so that the value itself is not in the pod's command.
			`BEGIN { exit !(toupper(ENVIRON["_FSEC_DB-CREDS_PASSWORD"]) == "`+strings.ToUpper(value)+`" && ENVIRON["FLYTE_SECRETS_ENV_PREFIX"] == "_FSEC_") }`)
		if err := c.Create(ctx, ta); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ta.Finalizers, flytev1.Finalizer) {
			t.Errorf("finalizers %v at creation", ta.Finalizers)
		}
		got := finished(ta.Name)
		if !meta.IsStatusConditionTrue(got.Status.Conditions, flytev1.ConditionSucceeded) {
			t.Fatalf("task did not succeed: %+v", got.Status)
		}
		pod := testenv.WaitPod(t, c, ns, got.Name+"-0")
		raw, _ := json.Marshal(pod)
		if strings.Contains(string(raw), value) {
			t.Errorf("the secret's value is in the pod")
		}
		if pod.Labels[secrets.PodLabel] != secrets.PodLabelValue {
			t.Errorf("pod labels %v", pod.Labels)
		}
	})

	t.Run("a secret that does not exist fails the task with a USER error naming it", func(t *testing.T) {
		ta := withSecret("missing", "no-such-secret", "token", "true")
		if err := c.Create(ctx, ta); err != nil {
			t.Fatal(err)
		}
		got := finished(ta.Name)
		es := got.Status.ErrorState
		if !meta.IsStatusConditionTrue(got.Status.Conditions, flytev1.ConditionFailed) || es == nil ||
			es.Kind != flytev1.ErrorKindUser || !strings.Contains(es.Message, `secret "no-such-secret"`) {
			t.Errorf("status %+v, want a USER failure naming the secret", got.Status)
		}
	})
}
