package spark

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	sparkv1beta2 "github.com/kubeflow/spark-operator/v2/api/v1beta2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/task"
)

// The golden objects.
//
// For each case below, testdata/golden/<case>.taskaction.yaml is the
// TaskAction the case builds (status.attempts is the attempt), written by
// this test with -update. testdata/golden/<case>.flyte.yaml is what Flyte's
// own Spark plugin built from that file: flyteorg/flyte at
// 6fadb90d65af26f4db908ec1c5f5af546a3e4299 (the commit docs/flyte-compat.md
// follows), with github.com/kubeflow/spark-operator/v2 v2.5.2 from its
// go.mod. A throwaway program, built outside this repository against that
// checkout and never committed, decoded each TaskAction file into Flyte's
// executor's TaskAction type, made the task execution context from it as
// Flyte's executor does (executor/pkg/plugin.NewTaskExecutionContext, an
// in-memory data store), launched it through Flyte's executor's k8s plugin
// manager with the spark plugin from Flyte's plugin registry, and printed,
// with sigs.k8s.io/yaml, the object the manager handed to the Kubernetes
// client's Create. Its configuration was goldenSettings and goldenConfig
// below in Flyte's keys:
//
//	plugins.k8s: default-cpus 1000m, default-memory 1024Mi, the default
//	  annotation, labels and env vars, interruptible tolerations and node
//	  selector of goldenSettings
//	plugins.spark: spark-config-default, features of goldenConfig;
//	  enable-pod-template as the case says, and the one-time CRD probe
//	  answered "the CRD has driver.template" (the v2.5.2 CRD has it)
//	executor.defaultK8sServiceAccount: "" (Flyte's default)
//
// Two things in Flyte's output are not stable, and the program fixed them:
// the driver's FLYTE_START_TIME (the milliseconds of the build), replaced by
// goldenStart's (this test builds with goldenStart as the reconcile's
// clock); and the order of the environment variables Flyte appends from Go
// maps (the run's: ACTION_NAME, RUN_NAME, _U_RUN_BASE, _U_ORG_NAME and
// spec.envVars; then plugins.k8s default-env-vars), random in Flyte, each
// block put in this plugin's order (those four first, then by name).
//
// The comparison is byte for byte after flyteView takes out the deliberate
// differences, each named there and listed in docs/engines/spark.md.
var update = flag.Bool("update", false, "rewrite the TaskAction inputs under testdata/golden (the .flyte.yaml facts are never written by this test)")

var goldenStart = time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)

// goldenSettings are the pod settings of a Flyte deployment as its chart
// configures them (plugintest.FlyteSettings), with a default label.
func goldenSettings() plugin.Settings {
	s := plugintest.FlyteSettings()
	s.DefaultLabels = map[string]string{"platform": "flyte"}
	return s
}

// goldenConfig is a plugins.spark section like Flyte's chart's.
func goldenConfig(podTemplates bool) Config {
	c := DefaultConfig()
	c.EnablePodTemplate = podTemplates
	c.DefaultSparkConfig = map[string]string{
		"spark.driver.cores":                           "1",
		"spark.executorEnv.KUBERNETES_REQUEST_TIMEOUT": "100000",
		"spark.hadoop.fs.s3a.aws.credentials.provider": "com.amazonaws.auth.DefaultAWSCredentialsProviderChain",
		"spark.kubernetes.allocation.batch.size":       "50",
		"spark.network.timeout":                        "600s",
	}
	c.Features = []Feature{
		{Name: "allow-s3", SparkConfig: map[string]string{
			"spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem", "spark.hadoop.fs.s3a.multipart.threshold": "536870912"}},
		{Name: "allow-s3", SparkConfig: map[string]string{"spark.ignored": "the first feature of a name wins"}},
	}
	return c
}

// goldenTaskAction is a TaskAction as Flyte's actions service applies it:
// its name, labels, owner reference to the parent, the run's env vars, and
// the template's bytes; status.attempts is the attempt.
func goldenTaskAction(t *testing.T, run, action, parent string, attempt uint32, tmpl *core.TaskTemplate) *flytev1.TaskAction {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	root := parent == ""
	name := run + "-" + action
	if root {
		name = run + "-a0"
	}
	ta := &flytev1.TaskAction{
		TypeMeta: metav1.TypeMeta{APIVersion: "flyte.org/v1", Kind: "TaskAction"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "flyte", UID: "6a3c2f0e-0000-4000-8000-000000000001",
			Labels: map[string]string{
				"flyte.org/project": "flytesnacks", "flyte.org/domain": "development", "flyte.org/run": run,
				"flyte.org/action": action, "flyte.org/action-type": "task", "flyte.org/is-root": map[bool]string{true: "true", false: "false"}[root],
			},
		},
		Spec: flytev1.TaskActionSpec{
			RunName: run, Project: "flytesnacks", Domain: "development", ActionName: action,
			InputURI:      "s3://flyte-data/flytesnacks/development/" + run + "/" + action + "/inputs.pb",
			RunOutputBase: "s3://flyte-data/flytesnacks/development/" + run + "/",
			TaskType:      tmpl.GetType(), ShortName: tmpl.GetId().GetName(), TaskTemplate: b,
			EnvVars: map[string]string{"LOG_LEVEL": "10"},
		},
		Status: flytev1.TaskActionStatus{Attempts: attempt},
	}
	if !root {
		ta.Spec.ParentActionName = &parent
		bod := true
		ta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "flyte.org/v1", Kind: "TaskAction", Name: run + "-a0",
			UID: "6a3c2f0e-0000-4000-8000-000000000000", BlockOwnerDeletion: &bod}}
	}
	return ta
}

// pyflyteArgs are the arguments flytekit gives a Spark task's driver.
func pyflyteArgs() []string {
	return []string{"pyflyte-fast-execute", "--additional-distribution", "s3://flyte-data/code/abc.tar.gz", "--dest-dir", ".", "--",
		"pyflyte-execute", "--inputs", "{{.input}}", "--output-prefix", "{{.outputPrefix}}", "--raw-output-data-prefix", "{{.rawOutputDataPrefix}}",
		"--checkpoint-path", "{{.checkpointOutputPrefix}}", "--prev-checkpoint", "{{.prevCheckpointPrefix}}",
		"--resolver", "flytekit.core.python_auto_container.default_task_resolver", "--", "task-module", "wf.spark", "task-name", "hello_spark"}
}

type goldenCase struct {
	name         string
	podTemplates bool
	ta           func(t *testing.T) *flytev1.TaskAction
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{name: "pyspark", podTemplates: true, ta: func(t *testing.T) *flytev1.TaskAction {
			return goldenTaskAction(t, "rspark1", "a0", "", 1, &core.TaskTemplate{
				Id: plugintest.TaskID("wf.spark.hello_spark"), Type: "spark",
				Metadata: &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 2}, Timeout: durationpb.New(3600e9),
					Runtime: &core.RuntimeMetadata{Type: core.RuntimeMetadata_FLYTE_SDK, Version: "1.16.0", Flavor: "python"}},
				Target: &core.TaskTemplate_Container{Container: &core.Container{
					Image: "ghcr.io/flyteorg/flytecookbook:k8s_spark-v1", Args: pyflyteArgs(),
					Env: []*core.KeyValuePair{{Key: "PYTHONUNBUFFERED", Value: "1"}},
					Resources: &core.Resources{
						Requests: []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_CPU, "1"), plugintest.Res(core.Resources_MEMORY, "2Gi")},
						Limits:   []*core.Resources_ResourceEntry{plugintest.Res(core.Resources_MEMORY, "4Gi")},
					},
				}},
				Custom: plugintest.Struct(t, map[string]any{
					"applicationType":     "PYTHON",
					"mainApplicationFile": "local:///usr/local/bin/entrypoint.py",
					"executorPath":        "/usr/bin/python3",
					"sparkConf": map[string]any{
						"spark.driver.memory": "1000M", "spark.executor.memory": "1000M", "spark.executor.cores": "1",
						"spark.executor.instances": "2", "spark.driver.cores": "1", "spark.flyte.allow-s3.enabled": "true",
					},
					"hadoopConf":      map[string]any{"fs.s3a.endpoint": "http://minio.flyte:9000"},
					"databricksToken": "ignored by the Kubernetes plugin",
				}),
			})
		}},
		{name: "pod-templates", podTemplates: true, ta: func(t *testing.T) *flytev1.TaskAction {
			driverSpec := map[string]any{
				"containers": []any{map[string]any{"name": "spark-kubernetes-driver",
					"volumeMounts": []any{map[string]any{"name": "scratch", "mountPath": "/scratch"}}}},
				"volumes":      []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{}}},
				"nodeSelector": map[string]any{"pool": "drivers"},
			}
			executorSpec := map[string]any{
				"containers": []any{map[string]any{"name": "spark-kubernetes-executor",
					"resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": "1"}}}},
				"tolerations":        []any{map[string]any{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}},
				"enableServiceLinks": true,
			}
			ta := goldenTaskAction(t, "rspark2", "n1", "a0", 2, &core.TaskTemplate{
				Id: plugintest.TaskID("wf.spark.etl"), Type: "spark",
				Metadata: &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: 1},
					InterruptibleValue: &core.TaskMetadata_Interruptible{Interruptible: true}},
				Target: &core.TaskTemplate_Container{Container: &core.Container{
					Image: "ghcr.io/acme/etl:2.3", Args: []string{"--inputs", "{{.input}}", "--outputs", "{{.outputPrefix}}"},
				}},
				SecurityContext: &core.SecurityContext{
					RunAs:   &core.Identity{K8SServiceAccount: "spark-runner"},
					Secrets: []*core.Secret{{Group: "aws", Key: "access-key", MountRequirement: core.Secret_ENV_VAR}},
				},
				Custom: plugintest.Struct(t, map[string]any{
					"applicationType":     "JAVA",
					"mainClass":           "com.acme.etl.Main",
					"mainApplicationFile": "local:///opt/etl.jar",
					"sparkConf": map[string]any{
						"spark.kubernetes.driver.request.cores": "500m", "spark.executor.cores": "2",
						"spark.kubernetes.executor.limit.cores": "3", "spark.batchScheduler": "volcano",
						"spark.flyte.unknown.enabled": "true", "spark.flyteorg.allow-s3.enabled": "no",
					},
					"driverPod":   map[string]any{"podSpec": driverSpec, "primaryContainerName": "spark-kubernetes-driver"},
					"executorPod": map[string]any{"podSpec": executorSpec},
				}),
			})
			interruptible := true
			ta.Spec.Interruptible = &interruptible
			return ta
		}},
		{name: "legacy-k8s-pod", podTemplates: false, ta: func(t *testing.T) *flytev1.TaskAction {
			podSpec := map[string]any{
				"containers": []any{
					map[string]any{"name": "main", "image": "ghcr.io/acme/spark-py:3.5", "args": []any{"run", "--inputs", "{{.input}}"},
						"resources": map[string]any{"requests": map[string]any{"cpu": "2", "memory": "3Gi"}}},
					map[string]any{"name": "sidecar", "image": "busybox:1.36"},
				},
				"securityContext":   map[string]any{"runAsUser": 1000},
				"schedulerName":     "volcano",
				"priorityClassName": "batch",
			}
			return goldenTaskAction(t, "rspark3", "a0", "", 1, &core.TaskTemplate{
				Id: plugintest.TaskID("wf.spark.pod"), Type: "spark", Config: map[string]string{"primary_container_name": "main"},
				Target: &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{PodSpec: plugintest.Struct(t, podSpec),
					Metadata: &core.K8SObjectMetadata{Labels: map[string]string{"app": "spark"}}}},
				Custom: plugintest.Struct(t, map[string]any{
					"applicationType":     "R",
					"mainApplicationFile": "local:///app/main.R",
					"sparkConf":           map[string]any{"spark.executor.instances": "0", "spark.driver.memory": ""},
				}),
			})
		}},
	}
}

func TestGoldenApplications(t *testing.T) {
	for _, gc := range goldenCases() {
		t.Run(gc.name, func(t *testing.T) {
			ta := gc.ta(t)
			in, err := yaml.Marshal(ta)
			if err != nil {
				t.Fatal(err)
			}
			inPath := filepath.Join("testdata", "golden", gc.name+".taskaction.yaml")
			if *update {
				plugintest.WriteFile(t, inPath, in)
			} else if want, err := os.ReadFile(inPath); err != nil || string(want) != string(in) {
				t.Fatalf("the case's TaskAction differs from %s, which Flyte's plugin was given (%v): run with -update and record Flyte's output again", inPath, err)
			}
			tk, err := task.FromTaskAction(ta)
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewWith(goldenConfig(gc.podTemplates))
			if err != nil {
				t.Fatal(err)
			}
			app, err := p.Build(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: int32(ta.Status.Attempts), Settings: goldenSettings(), Now: goldenStart})
			if err != nil {
				t.Fatal(err)
			}
			got, err := yaml.Marshal(flyteView(app))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", gc.name+".flyte.yaml")
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (Flyte's output for this case must be recorded)", err)
			}
			if string(got) != string(want) {
				t.Errorf("the SparkApplication differs from Flyte's, %s:\n%s", path, plugintest.LineDiff(string(want), string(got)))
			}
		})
	}
}

// flyteView is app with the deliberate differences from Flyte's plugin
// taken out (docs/engines/spark.md lists each with its reason).
func flyteView(app *sparkv1beta2.SparkApplication) *sparkv1beta2.SparkApplication {
	out := app.DeepCopy()
	// The owner reference also blocks the TaskAction's deletion until the
	// garbage collector has removed the application (as for pods).
	for i := range out.OwnerReferences {
		out.OwnerReferences[i].BlockOwnerDeletion = nil
	}
	return out
}
