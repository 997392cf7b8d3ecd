package spark

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	sparkv1beta2 "github.com/kubeflow/spark-operator/v2/api/v1beta2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// TestSparkConf: Flyte's rules for the application's Spark configuration:
// defaults under the job's keys, the executor path, features switched on by
// "true" (the first feature of the name; an unknown feature or another value
// stays a plain key), CPU limits following the requests unless set, and the
// keys the plugin always writes.
func TestSparkConf(t *testing.T) {
	now := time.UnixMilli(1796630400123)
	features := []Feature{{Name: "s3", SparkConfig: map[string]string{"spark.s3": "on"}}, {Name: "s3", SparkConfig: map[string]string{"spark.s3": "second"}}}
	fixed := map[string]string{confExecutorPodNamePrefix: "app-0", confDriverStartTime: "1796630400123"}
	for _, tc := range []struct {
		name     string
		defaults map[string]string
		job      *plugins.SparkJob
		want     map[string]string
	}{
		{"nothing", nil, &plugins.SparkJob{}, map[string]string{}},
		{"the job's keys over the defaults", map[string]string{"a": "1", "b": "2"}, &plugins.SparkJob{SparkConf: map[string]string{"b": "3"}},
			map[string]string{"a": "1", "b": "3"}},
		{"executor path", nil, &plugins.SparkJob{ExecutorPath: "/opt/py"},
			map[string]string{confPySparkPython: "/opt/py", confPySparkDriverPython: "/opt/py"}},
		{"a feature switched on", nil, &plugins.SparkJob{SparkConf: map[string]string{"spark.flyte.s3.enabled": " TRUE "}},
			map[string]string{"spark.s3": "on"}},
		{"the flyteorg spelling", nil, &plugins.SparkJob{SparkConf: map[string]string{"spark.flyteorg.s3.enabled": "true"}},
			map[string]string{"spark.s3": "on"}},
		{"a feature switched off stays a key", nil, &plugins.SparkJob{SparkConf: map[string]string{"spark.flyte.s3.enabled": "false"}},
			map[string]string{"spark.flyte.s3.enabled": "false"}},
		{"an unknown feature stays a key", nil, &plugins.SparkJob{SparkConf: map[string]string{"spark.flyte.gcs.enabled": "true"}},
			map[string]string{"spark.flyte.gcs.enabled": "true"}},
		{"a key the job sets wins over its feature's", nil, &plugins.SparkJob{SparkConf: map[string]string{"spark.flyte.s3.enabled": "true", "spark.s3": "mine"}},
			map[string]string{"spark.s3": "mine"}},
		{"a feature's key wins over a default", map[string]string{"spark.s3": "default"}, &plugins.SparkJob{SparkConf: map[string]string{"spark.flyte.s3.enabled": "true"}},
			map[string]string{"spark.s3": "on"}},
		{"driver cores give the limit", nil, &plugins.SparkJob{SparkConf: map[string]string{confDriverCores: "2"}},
			map[string]string{confDriverCores: "2", "spark.kubernetes.driver.limit.cores": "2"}},
		{"the request wins over the cores", nil, &plugins.SparkJob{SparkConf: map[string]string{confExecutorCores: "2", "spark.kubernetes.executor.request.cores": "1500m"}},
			map[string]string{confExecutorCores: "2", "spark.kubernetes.executor.request.cores": "1500m", "spark.kubernetes.executor.limit.cores": "1500m"}},
		{"a limit set stays", map[string]string{"spark.kubernetes.driver.limit.cores": "4"}, &plugins.SparkJob{SparkConf: map[string]string{confDriverCores: "2"}},
			map[string]string{confDriverCores: "2", "spark.kubernetes.driver.limit.cores": "4"}},
		{"the plugin's keys win", nil, &plugins.SparkJob{SparkConf: map[string]string{confExecutorPodNamePrefix: "mine"}}, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := maps.Clone(tc.want)
			maps.Copy(want, fixed)
			got := sparkConf(tc.job, Config{DefaultSparkConfig: tc.defaults, Features: features}, "app-0", now)
			if !maps.Equal(got, want) {
				t.Errorf("got %v\nwant %v", got, want)
			}
		})
	}
}

func spark(t *testing.T, job map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(job)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func flyteTask(t *testing.T, custom *structpb.Struct) *task.Task {
	t.Helper()
	tmpl := &core.TaskTemplate{Type: "spark", Custom: custom,
		Target: &core.TaskTemplate_Container{Container: &core.Container{Image: "img:1", Args: []string{"run"}}}}
	b, err := proto.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := task.FromTaskAction(&flytev1.TaskAction{Spec: flytev1.TaskActionSpec{TaskTemplate: b}})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestJob: the job comes from the template's custom (Flyte's JSON names or
// the field names, unknown fields such as the Databricks settings ignored),
// or from the typed form's config; either way it needs a main file or
// class. Every fault is a permanent BadTaskSpecification.
func TestJob(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    func(t *testing.T) *task.Task
		want *plugins.SparkJob
		err  string
	}{
		{"Flyte: JSON names", func(t *testing.T) *task.Task {
			return flyteTask(t, spark(t, map[string]any{"applicationType": "SCALA", "mainClass": "a.B", "sparkConf": map[string]any{"k": "v"},
				"databricksConf": map[string]any{"x": 1}, "databricksToken": "t"}))
		}, &plugins.SparkJob{ApplicationType: plugins.SparkApplication_SCALA, MainClass: "a.B", SparkConf: map[string]string{"k": "v"}}, ""},
		{"Flyte: an enum number", func(t *testing.T) *task.Task {
			return flyteTask(t, spark(t, map[string]any{"applicationType": 3, "mainApplicationFile": "f.R"}))
		}, &plugins.SparkJob{ApplicationType: plugins.SparkApplication_R, MainApplicationFile: "f.R"}, ""},
		{"Flyte: no custom", func(t *testing.T) *task.Task { return flyteTask(t, nil) }, nil, "has no custom"},
		{"Flyte: no main", func(t *testing.T) *task.Task {
			return flyteTask(t, spark(t, map[string]any{"sparkConf": map[string]any{}}))
		}, nil, "mainApplicationFile or a mainClass"},
		{"Flyte: a value of the wrong type", func(t *testing.T) *task.Task {
			return flyteTask(t, spark(t, map[string]any{"mainClass": "a", "sparkConf": "x"}))
		}, nil, "is not a SparkJob"},
		{"typed: config", func(*testing.T) *task.Task {
			return &task.Task{Form: task.FormTyped, Config: map[string]string{ConfigKey: `{"mainApplicationFile": "local:///a.py", "executorPath": "/py"}`}}
		}, &plugins.SparkJob{MainApplicationFile: "local:///a.py", ExecutorPath: "/py"}, ""},
		{"typed: no config", func(*testing.T) *task.Task { return &task.Task{Form: task.FormTyped} }, nil, "spec.template.config.sparkJob is required"},
		{"typed: an unknown field", func(*testing.T) *task.Task {
			return &task.Task{Form: task.FormTyped, Config: map[string]string{ConfigKey: `{"mainClass": "a", "mainFile": "b"}`}}
		}, nil, "is not a SparkJob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Job(tc.t(t))
			if tc.err != "" {
				var le *plugin.LaunchError
				if !errors.As(err, &le) || le.Retryable || le.Err.Code != CodeBadTaskSpecification || le.Err.Kind != flytev1.ErrorKindUser || !strings.Contains(le.Err.Message, tc.err) {
					t.Fatalf("err %v; want a permanent user BadTaskSpecification containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !proto.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func typedTaskAction(job string) *flytev1.TaskAction {
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: "etl", Namespace: "ns", UID: "u1"},
		Spec: flytev1.TaskActionSpec{RunName: "r1", Project: "p", Domain: "d", ActionName: "a1", TaskType: "spark",
			InputURI: "s3://b/in", RunOutputBase: "s3://b/out",
			Template: &flytev1.TypedTaskTemplate{ID: flytev1.TaskID{Name: "etl", Version: "v1"}, Retries: 1,
				Container: &flytev1.Container{Image: "spark:3.5", Args: []string{"--in", "{{.input}}"}},
				Config:    map[string]string{ConfigKey: job}}},
	}
}

// TestBuildTyped: a typed TaskAction's application: the job from its
// config, the driver as the resolved account ("spark" without one), the
// executors with the attempt's pod name prefix, the template's container
// renamed for the operator, its arguments rendered.
func TestBuildTyped(t *testing.T) {
	ta := typedTaskAction(`{"mainApplicationFile": "local:///app.py", "sparkConf": {"spark.executor.instances": "3"}, "hadoopConf": {"h": "1"}}`)
	tk, err := task.FromTaskAction(ta)
	if err != nil {
		t.Fatal(err)
	}
	app, err := Build(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 2}, DefaultConfig(), time.UnixMilli(42))
	if err != nil {
		t.Fatal(err)
	}
	s := app.Spec
	switch {
	case app.Name != "etl-1" || app.Namespace != "ns":
		t.Errorf("name %s/%s", app.Namespace, app.Name)
	case !plugin.OwnedBy(app, ta):
		t.Errorf("owner references %+v", app.OwnerReferences)
	case app.Labels[plugin.LabelManaged] != "true" || app.Labels["attempt"] != "2":
		t.Errorf("labels %v", app.Labels)
	case s.Type != sparkv1beta2.SparkApplicationTypePython || *s.MainApplicationFile != "local:///app.py" || s.MainClass != nil:
		t.Errorf("type and main: %v %v %v", s.Type, s.MainApplicationFile, s.MainClass)
	case *s.Image != "spark:3.5" || strings.Join(s.Arguments, " ") != "--in s3://b/in/inputs.pb":
		t.Errorf("image %s, arguments %v", *s.Image, s.Arguments)
	case *s.Driver.ServiceAccount != "spark" || *s.Executor.ServiceAccount != "spark":
		t.Errorf("service accounts %v %v", *s.Driver.ServiceAccount, *s.Executor.ServiceAccount)
	case *s.Executor.Instances != 3 || s.SparkConf[confExecutorPodNamePrefix] != "etl-1" || s.SparkConf[confDriverStartTime] != "42":
		t.Errorf("executors %v, conf %v", *s.Executor.Instances, s.SparkConf)
	case s.Driver.Template.Spec.Containers[0].Name != DriverContainerName || s.Executor.Template.Spec.Containers[0].Name != ExecutorContainerName:
		t.Errorf("template containers %s %s", s.Driver.Template.Spec.Containers[0].Name, s.Executor.Template.Spec.Containers[0].Name)
	case s.Driver.Template.Spec.Containers[0].Args != nil || s.SparkVersion != minPodTemplateSparkVersion:
		t.Errorf("template args %v, spark version %q", s.Driver.Template.Spec.Containers[0].Args, s.SparkVersion)
	case s.HadoopConf["h"] != "1" || s.RestartPolicy.Type != sparkv1beta2.RestartPolicyOnFailure || *s.RestartPolicy.OnSubmissionFailureRetries != 14:
		t.Errorf("hadoop conf %v, restart policy %+v", s.HadoopConf, s.RestartPolicy)
	}
	if env := s.Driver.Env; env[len(env)-1].Name != EnvMaxAttempts || env[len(env)-1].Value != "2" {
		t.Errorf("the driver's env ends with %+v; want %s=2", env[len(env)-1], EnvMaxAttempts)
	}
	if _, ok := app.Annotations["primary_container_name"]; ok {
		t.Errorf("annotations %v: the operator's pods name their own containers", app.Annotations)
	}
}

// TestBuildServiceAccount: the task's account, else the executor's default,
// else "spark"; executors get it only with pod templates.
func TestBuildServiceAccount(t *testing.T) {
	for _, tc := range []struct {
		name, runAs, def string
		templates        bool
		driver, executor string
	}{
		{"none", "", "", true, "spark", "spark"},
		{"the executor's default", "", "flyte-worker", true, "flyte-worker", "flyte-worker"},
		{"the task's", "etl-runner", "flyte-worker", true, "etl-runner", "etl-runner"},
		{"legacy fields: the driver's only", "etl-runner", "", false, "etl-runner", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := typedTaskAction(`{"mainClass": "a.B"}`)
			if tc.runAs != "" {
				ta.Spec.Template.SecurityContext = &flytev1.SecurityContext{RunAs: &flytev1.RunAs{K8sServiceAccount: tc.runAs}}
			}
			cfg := DefaultConfig()
			cfg.EnablePodTemplate = tc.templates
			app, err := Build(plugin.TaskContext{TaskAction: ta, Attempt: 1, Settings: plugin.Settings{DefaultServiceAccount: tc.def}}, cfg, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if a := app.Spec.Executor.ServiceAccount; a != nil {
				got = *a
			}
			if *app.Spec.Driver.ServiceAccount != tc.driver || got != tc.executor {
				t.Errorf("driver %s, executors %q; want %s, %q", *app.Spec.Driver.ServiceAccount, got, tc.driver, tc.executor)
			}
			if !tc.templates && (app.Spec.Driver.Template != nil || app.Spec.SparkVersion != "" || app.Spec.SparkConf["spark.kubernetes.driver.podTemplateContainerName"] != "") {
				t.Errorf("legacy fields only: template %v, version %q", app.Spec.Driver.Template, app.Spec.SparkVersion)
			}
		})
	}
}

// TestBuildRefusals: what cannot become an application is a permanent user
// failure naming the fault, decided before anything is created.
func TestBuildRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, job, err string
	}{
		{"no main", `{}`, "mainApplicationFile or a mainClass"},
		{"a driver pod spec that is not one", `{"mainClass": "a", "driverPod": {"podSpec": {"containers": "x"}}}`, "driverPod.podSpec"},
		{"an executor pod spec with an unknown field", `{"mainClass": "a", "executorPod": {"podSpec": {"nodeSelectr": {}}}}`, "executorPod.podSpec"},
		{"a huge quantity in a pod spec", `{"mainClass": "a", "driverPod": {"podSpec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1e2147483648"}}}]}}}`, "driverPod.podSpec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(plugin.TaskContext{TaskAction: typedTaskAction(tc.job), Attempt: 1}, DefaultConfig(), time.Time{})
			var le *plugin.LaunchError
			if !errors.As(err, &le) || le.Retryable || le.Err.Code != CodeBadTaskSpecification || !strings.Contains(le.Err.Message, tc.err) {
				t.Fatalf("err %v; want a permanent BadTaskSpecification naming %q", err, tc.err)
			}
		})
	}
}

func TestApplicationType(t *testing.T) {
	for in, want := range map[plugins.SparkApplication_Type]sparkv1beta2.SparkApplicationType{
		plugins.SparkApplication_PYTHON: sparkv1beta2.SparkApplicationTypePython, plugins.SparkApplication_JAVA: sparkv1beta2.SparkApplicationTypeJava,
		plugins.SparkApplication_SCALA: sparkv1beta2.SparkApplicationTypeScala, plugins.SparkApplication_R: sparkv1beta2.SparkApplicationTypeR,
		plugins.SparkApplication_Type(9): sparkv1beta2.SparkApplicationTypePython,
	} {
		if got := applicationType(in); got != want {
			t.Errorf("%v: %v, want %v", in, got, want)
		}
	}
}

func TestNonZeroInt32(t *testing.T) {
	for in, want := range map[string]int32{"2": 2, "-1": -1, "0": 0, "": 0, "1.5": 0, "2g": 0, "99999999999": 0} {
		got, ok := nonZeroInt32(in)
		if got != want || ok != (want != 0) {
			t.Errorf("%q: %d %v, want %d", in, got, ok, want)
		}
	}
}
