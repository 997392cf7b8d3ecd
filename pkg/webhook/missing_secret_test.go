package webhook_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
)

// The references the webhook injects are not optional, so a Secret or key
// that does not exist stops the container in CreateContainerConfigError with
// the kubelet's message. The task must then fail as a USER error whose
// message names the secret. The messages are the kubelet's own (a missing
// Secret is the API's NotFound; a missing key its own sentence) and the
// local node's (`executor local`).
func TestMissingSecretFailsTheTaskNamingIt(t *testing.T) {
	cases := []struct {
		name, message, want string
	}{
		{"kubelet: no such Secret", `secret "db-creds" not found`, `secret "db-creds" not found`},
		{"kubelet: no such key", `couldn't find key password in Secret team-a/db-creds`, "password in Secret team-a/db-creds"},
		{"local node", `env DB_PASSWORD: key "password" of secret "db-creds" not found`, `secret "db-creds"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{CreationTimestamp: start},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: container.DefaultPrimaryContainerName}}},
				Status: corev1.PodStatus{
					Phase:     corev1.PodPending,
					StartTime: &start,
					ContainerStatuses: []corev1.ContainerStatus{{
						Name:  container.DefaultPrimaryContainerName,
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: tc.message}},
					}},
				},
			}
			// Long after any grace period.
			obs := container.ObservePod(pod, start.Add(24*time.Hour), plugin.Settings{})
			if !obs.Phase.IsTerminal() || obs.Phase == plugin.PhaseSucceeded {
				t.Fatalf("phase %s, want a failure", obs.Phase)
			}
			if obs.Error == nil || obs.Error.Kind != flytev1.ErrorKindUser || !strings.Contains(obs.Error.Message, tc.want) {
				t.Errorf("error %+v, want a USER error naming %s", obs.Error, tc.want)
			}
		})
	}
}
