package container

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/task"
)

// The expected pods under testdata/golden were derived from the rules of
// Flyte's pod plugin (see docs/flyte-compat.md for the deliberate
// differences) and reviewed by hand; -update rewrites them from the builder,
// after which they must be reviewed again.
var update = flag.Bool("update", false, "rewrite the expected pods under testdata/golden")

// flyteTaskAction is a TaskAction as Flyte's actions service applies it: its
// name, labels, owner reference to the parent, the run's env vars, and the
// template's bytes.
func flyteTaskAction(t *testing.T, run, action, parent string, tmpl *core.TaskTemplate) *flytev1.TaskAction {
	t.Helper()
	b, err := proto.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	root := parent == ""
	name := run + "-" + action
	if root {
		name = run + "-a0"
	}
	ta := &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "flyte", UID: "6a3c2f0e-0000-4000-8000-000000000001",
			Labels: map[string]string{
				"flyte.org/project": "flytesnacks", "flyte.org/domain": "development", "flyte.org/run": run,
				"flyte.org/action": action, "flyte.org/action-type": "task", "flyte.org/is-root": map[bool]string{true: "true", false: "false"}[root],
			},
		},
		Spec: flytev1.TaskActionSpec{
			RunName: run, Project: "flytesnacks", Domain: "development", ActionName: action,
			InputURI:      "s3://flyte-data/flytesnacks/development/" + run + "/" + action,
			RunOutputBase: "s3://flyte-data/flytesnacks/development/" + run + "/",
			TaskType:      tmpl.GetType(), ShortName: tmpl.GetId().GetName(), TaskTemplate: b,
			EnvVars: map[string]string{"LOG_LEVEL": "10"},
		},
	}
	if !root {
		ta.Spec.ParentActionName = &parent
		ta.Spec.InputURI += "/inputs.pb"
		bod := true
		ta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "flyte.org/v1", Kind: "TaskAction", Name: run + "-a0",
			UID: "6a3c2f0e-0000-4000-8000-000000000000", BlockOwnerDeletion: &bod}}
	}
	return ta
}

func TestGoldenPods(t *testing.T) {
	sidecarSpec, err := structpb.NewStruct(map[string]any{
		"containers": []any{
			map[string]any{"name": "primary", "image": "ghcr.io/flyteorg/py:v1", "args": []any{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}"},
				"volumeMounts": []any{map[string]any{"name": "scratch", "mountPath": "/scratch"}}},
			map[string]any{"name": "proxy", "image": "envoyproxy/envoy:v1.30", "args": []any{"--config-path", "/etc/envoy/{{.namespace}}.yaml"},
				"resources": map[string]any{"requests": map[string]any{"cpu": "100m"}}},
		},
		"volumes":                       []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{}}},
		"terminationGracePeriodSeconds": 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	fixtures := []struct {
		name    string
		ta      func(t *testing.T) *flytev1.TaskAction
		attempt int32
	}{
		{name: "python-resources", attempt: 1, ta: func(t *testing.T) *flytev1.TaskAction {
			return flyteTaskAction(t, "rabc123", "a0", "", &core.TaskTemplate{
				Id: plugintest.TaskID("wf.train"), Type: "python",
				Metadata: &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 2}, Timeout: durationpb.New(600e9),
					Runtime: &core.RuntimeMetadata{Type: core.RuntimeMetadata_FLYTE_SDK, Version: "2.0.0"}},
				Target: &core.TaskTemplate_Container{Container: &core.Container{
					Image: "ghcr.io/flyteorg/py:v1", Args: plugintest.SDKArgs("fn"),
					Env: []*core.KeyValuePair{{Key: "PYTHONUNBUFFERED", Value: "1"}},
					Resources: &core.Resources{
						Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "2"), plugintest.Res(core.Resources_MEMORY, "4Gi"), plugintest.Res(core.Resources_GPU, "1")},
						Limits:   []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_MEMORY, "8Gi"), plugintest.Res(core.Resources_EPHEMERAL_STORAGE, "20Gi")},
					},
				}},
				ExtendedResources: &core.ExtendedResources{GpuAccelerator: &core.GPUAccelerator{Device: "T4"}},
			})
		}},
		{name: "k8s-pod-two-containers", attempt: 2, ta: func(t *testing.T) *flytev1.TaskAction {
			return flyteTaskAction(t, "rabc123", "n1", "a0", &core.TaskTemplate{
				Id: plugintest.TaskID("wf.serve"), Type: "python", Config: map[string]string{"primary_container_name": "primary"},
				Metadata: &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 1}},
				Target: &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PodSpec: sidecarSpec,
					Metadata: &core.K8SObjectMetadata{Labels: map[string]string{"app": "serve"}, Annotations: map[string]string{"prometheus.io/scrape": "true"}}}},
			})
		}},
		{name: "secrets", attempt: 1, ta: func(t *testing.T) *flytev1.TaskAction {
			return flyteTaskAction(t, "rabc123", "n2", "a0", &core.TaskTemplate{
				Id: plugintest.TaskID("wf.fetch"), Type: "python",
				Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "ghcr.io/flyteorg/py:v1", Args: []string{"a0", "--inputs", "{{.input}}"}}},
				SecurityContext: &core.SecurityContext{
					RunAs: &core.Identity{K8SServiceAccount: "fetcher"},
					Secrets: []*core.Secret{
						{Group: "aws", Key: "access-key", MountRequirement: core.Secret_ENV_VAR},
						{Key: "db-password", MountRequirement: core.Secret_FILE},
						{Key: "openai", EnvVar: "OPENAI_API_KEY"},
					},
				},
			})
		}},
		{name: "interruptible", attempt: 1, ta: func(t *testing.T) *flytev1.TaskAction {
			ta := flyteTaskAction(t, "rabc123", "n3", "a0", &core.TaskTemplate{
				Id: plugintest.TaskID("wf.batch"), Type: "python",
				Metadata: &core.TaskMetadata{InterruptibleValue: &core.TaskMetadata_Interruptible{Interruptible: true}},
				Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "ghcr.io/flyteorg/py:v1", Args: []string{"a0", "--checkpoint-path", "{{.checkpointOutputPrefix}}"},
					Resources: &core.Resources{Limits: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "500m")}}}},
			})
			interruptible := true
			ta.Spec.Interruptible = &interruptible
			return ta
		}},
	}
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			ta := fx.ta(t)
			tk, err := task.FromTaskAction(ta)
			if err != nil {
				t.Fatal(err)
			}
			pod, err := BuildPod(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: fx.attempt, Settings: plugintest.FlyteSettings()})
			if err != nil {
				t.Fatal(err)
			}
			got, err := yaml.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", fx.name+".yaml")
			if *update {
				plugintest.WriteFile(t, path, got)
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("pod differs from %s:\n%s", path, plugintest.LineDiff(string(want), string(got)))
			}
		})
	}
}
