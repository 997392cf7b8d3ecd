package setup_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/setup"
)

// privilegedTaskAction asks for a privileged container with a hostPath of /.
func privilegedTaskAction(t *testing.T) *flytev1.TaskAction {
	t.Helper()
	yes := true
	doc, err := flytev1.PodSpecDocumentOf(&corev1.PodSpec{
		Containers: []corev1.Container{{Name: "primary", SecurityContext: &corev1.SecurityContext{Privileged: &yes}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: "team-a", UID: "u1"},
		Spec: flytev1.TaskActionSpec{
			RunName: "r", Project: "p", Domain: "d", ActionName: "a", TaskType: "container",
			InputURI: "file:///tmp/in", RunOutputBase: "file:///tmp/out",
			Template: &flytev1.TypedTaskTemplate{
				Container:   &flytev1.Container{Image: "busybox", Command: []string{"true"}},
				PodTemplate: &flytev1.PodTemplate{PrimaryContainerName: "primary", Spec: doc},
			},
		},
	}
}

func settingsAt(t *testing.T, level string) plugin.Settings {
	t.Helper()
	cfg := config.Default()
	cfg.PodSecurity.Level = level
	s, err := setup.PluginSettings(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The same policy decides at admission (the validator) and at launch
// (BuildPod): a privileged pod is refused by the default baseline level and
// accepted by the privileged level.
func TestPodSecurityAtAdmissionAndLaunch(t *testing.T) {
	ta := privilegedTaskAction(t)

	baseline := settingsAt(t, config.Default().PodSecurity.Level)
	err := setup.TaskActionValidator(baseline, nil)(ta)
	if err == nil || !strings.Contains(err.Error(), "privileged") || !strings.Contains(err.Error(), "baseline") {
		t.Fatalf("admission with the default policy: %v, want a refusal naming privileged and baseline", err)
	}
	_, err = container.BuildPod(plugin.TaskContext{TaskAction: ta, Attempt: 1, Settings: baseline})
	le, ok := err.(*plugin.LaunchError)
	if !ok || le.Retryable || le.Err.Code != container.CodePodSecurityViolation || le.Err.Kind != flytev1.ErrorKindUser {
		t.Fatalf("launch with the default policy: %#v, want a permanent USER PodSecurityViolation", err)
	}

	privileged := settingsAt(t, "privileged")
	if err := setup.TaskActionValidator(privileged, nil)(ta); err != nil {
		t.Fatalf("admission with the privileged policy: %v", err)
	}
	if _, err := container.BuildPod(plugin.TaskContext{TaskAction: ta, Attempt: 1, Settings: privileged}); err != nil {
		t.Fatalf("launch with the privileged policy: %v", err)
	}
}

func TestValidatorNamesTheUndecodableField(t *testing.T) {
	ta := privilegedTaskAction(t)
	ta.Spec.Template = nil
	ta.Spec.TaskTemplate = []byte{0xff, 0x01}
	err := setup.TaskActionValidator(settingsAt(t, "baseline"), nil)(ta)
	if err == nil || !strings.Contains(err.Error(), "spec.taskTemplate") {
		t.Fatalf("undecodable template bytes: %v, want an error naming spec.taskTemplate", err)
	}
}
