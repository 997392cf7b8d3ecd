package envtest

import (
	"context"
	"strings"
	"testing"
	"time"

	sparkv1beta2 "github.com/kubeflow/spark-operator/v2/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/internal/enginetest"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/controller"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/spark"
	"github.com/taskaction/executor/pkg/task"
)

// linkNamed is the link of evs' event of phase named name, if any.
func linkNamed(evs []events.Event, phase events.Phase, name string) *core.TaskLog {
	for _, e := range evs {
		if e.Phase != phase {
			continue
		}
		for _, l := range e.LogLinks {
			if l.GetName() == name {
				return l
			}
		}
	}
	return nil
}

// TestSuccess: a spark task runs as a SparkApplication the TaskAction
// controls, built from the template's SparkJob (the driver and executors run
// the task's container as the operator's containers); the operator's states
// (none yet, SUBMITTED, RUNNING, COMPLETED) are QUEUED, INITIALIZING,
// RUNNING (Executing; the driver's dashboard and UI linked) and SUCCEEDED
// (Completed; the history server linked), and the finished application stays
// for its logs.
func TestSuccess(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, sparkAction(t, ns, "etl", 0, 0))
	app := waitApp(t, ns, "etl", 1)
	if ref := metav1.GetControllerOf(app); ref == nil || ref.Kind != "TaskAction" || ref.Name != "etl" {
		t.Fatalf("the application's controller is %+v", ref)
	}
	s := app.Spec
	if s.Type != sparkv1beta2.SparkApplicationTypePython || s.MainApplicationFile == nil || *s.MainApplicationFile != "local:///usr/local/bin/entrypoint.py" ||
		*s.Executor.Instances != 2 || s.SparkConf["spark.pyspark.python"] != "/usr/bin/python3" || s.SparkConf["spark.kubernetes.executor.podNamePrefix"] != "etl-0" {
		t.Errorf("spec %+v", s)
	}
	if !strings.HasPrefix(strings.Join(s.Arguments, " "), "pyflyte-execute --inputs s3://b/"+ns+"/etl/inputs.pb --output-prefix s3://b/") {
		t.Errorf("arguments %v", s.Arguments)
	}
	if c := s.Driver.Template.Spec.Containers[0]; c.Name != spark.DriverContainerName || c.Image != "ghcr.io/flyteorg/spark:v1" {
		t.Errorf("driver template container %s %s", c.Name, c.Image)
	}
	if app.Labels[plugin.LabelManaged] != "true" || s.Executor.Labels["attempt"] != "1" || s.Driver.Labels[plugin.LabelManaged] != "true" {
		t.Errorf("labels %v, %v", app.Labels, s.Executor.Labels)
	}

	testenv.WaitReason(t, k8s, ns, "etl", flytev1.ConditionProgressing, flytev1.ReasonQueued)
	setStatus(t, app, state(sparkv1beta2.ApplicationStateSubmitted, ""))
	testenv.WaitReason(t, k8s, ns, "etl", flytev1.ConditionProgressing, flytev1.ReasonInitializing)
	setStatus(t, app, driver("etl-0-driver", "spark.example.com/etl"))
	setStatus(t, app, state(sparkv1beta2.ApplicationStateRunning, ""))
	testenv.WaitReason(t, k8s, ns, "etl", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setStatus(t, app, state(sparkv1beta2.ApplicationStateCompleted, ""))
	got := testenv.WaitReason(t, k8s, ns, "etl", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 1 {
		t.Errorf("attempts %d", got.Status.Attempts)
	}
	evs := suite.Events(ns, "etl")
	if p := enginetest.Phases(evs); p != "1:QUEUED 1:INITIALIZING 1:RUNNING 1:SUCCEEDED" {
		t.Errorf("events %s", p)
	}
	if l := linkNamed(evs, events.PhaseRunning, "Kubernetes Logs"); l == nil || l.GetUri() != "http://dashboard/"+ns+"/etl-0-driver" {
		t.Errorf("the RUNNING event's driver link: %v", l)
	}
	if l := linkNamed(evs, events.PhaseRunning, spark.DriverUIName); l == nil || l.GetUri() != "https://spark.example.com/etl" || !l.GetReady() {
		t.Errorf("the RUNNING event's Spark UI link: %v", l)
	}
	if l := linkNamed(evs, events.PhaseSucceeded, spark.HistoryUIName); l == nil || l.GetUri() != "http://history/history/spark-0123" {
		t.Errorf("the SUCCEEDED event's history link: %v", l)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(app), &sparkv1beta2.SparkApplication{}); err != nil {
		t.Errorf("the finished application is gone: %v", err)
	}
}

// TestUserFailure: an application the operator marks FAILED fails the task
// with Flyte's code and kind (DownstreamSystemError, USER) and the
// operator's message when no attempt is left; the application stays.
func TestUserFailure(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, sparkAction(t, ns, "bad", 0, 0))
	app := waitApp(t, ns, "bad", 1)
	setStatus(t, app, state(sparkv1beta2.ApplicationStateRunning, ""))
	testenv.WaitReason(t, k8s, ns, "bad", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	setStatus(t, app, state(sparkv1beta2.ApplicationStateFailed, "driver container failed with ExitCode: 1, Reason: Error"))
	got := testenv.WaitReason(t, k8s, ns, "bad", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	es := got.Status.ErrorState
	if es == nil || es.Code != spark.CodeDownstreamSystemError || es.Kind != flytev1.ErrorKindUser || !strings.Contains(es.Message, "driver container failed with ExitCode: 1") {
		t.Errorf("errorState %+v", es)
	}
	if p := enginetest.Phases(suite.Events(ns, "bad")); p != "1:QUEUED 1:RUNNING 1:FAILED" {
		t.Errorf("events %s", p)
	}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(app), &sparkv1beta2.SparkApplication{}); err != nil {
		t.Errorf("the failed application is gone: %v", err)
	}
}

// TestRuntimeError: an application that completed after the task's runtime
// wrote a non-recoverable error.pb fails the task with the runtime's error
// at once, retries left or not (the driver's runtime exits 0 after a user
// error).
func TestRuntimeError(t *testing.T) {
	ns := suite.Namespace(t)
	ta := sparkAction(t, ns, "raises", 2, 0)
	enginetest.Create(t, k8s, ta)
	app := waitApp(t, ns, "raises", 1)
	store := suite.Store(t)
	doc := &core.ErrorDocument{Error: &core.ContainerError{Code: "USER:ValueError", Message: "bad input", Kind: core.ContainerError_NON_RECOVERABLE}}
	if err := store.WriteProtobuf(context.Background(), task.ErrorURI(ta, 1), doc); err != nil {
		t.Fatal(err)
	}
	setStatus(t, app, state(sparkv1beta2.ApplicationStateCompleted, ""))
	got := testenv.WaitReason(t, k8s, ns, "raises", flytev1.ConditionFailed, flytev1.ReasonPermanentFailure)
	if es := got.Status.ErrorState; es == nil || es.Code != "USER:ValueError" || es.Message != "bad input" {
		t.Errorf("errorState %+v", es)
	}
	if got.Status.Attempts != 1 {
		t.Errorf("attempts %d: a non-recoverable error is not retried", got.Status.Attempts)
	}
}

// TestRetry: with a retry left, a failed application is deleted and the
// next attempt runs as a new application under the next name.
func TestRetry(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, sparkAction(t, ns, "again", 1, 0))
	first := waitApp(t, ns, "again", 1)
	setStatus(t, first, state(sparkv1beta2.ApplicationStateFailed, "executor lost"))
	second := waitApp(t, ns, "again", 2)
	if second.Name != "again-1" || second.UID == first.UID {
		t.Fatalf("the second attempt's application %s (uid %s)", second.Name, second.UID)
	}
	enginetest.WaitGone(t, k8s, first)
	if second.Spec.SparkConf["spark.kubernetes.executor.podNamePrefix"] != "again-1" || second.Spec.Driver.Labels["attempt"] != "2" {
		t.Errorf("the second attempt's executors %q, driver labels %v", second.Spec.SparkConf["spark.kubernetes.executor.podNamePrefix"], second.Spec.Driver.Labels)
	}
	setStatus(t, second, state(sparkv1beta2.ApplicationStateCompleted, ""))
	got := testenv.WaitReason(t, k8s, ns, "again", flytev1.ConditionSucceeded, flytev1.ReasonCompleted)
	if got.Status.Attempts != 2 {
		t.Errorf("attempts %d", got.Status.Attempts)
	}
	p := enginetest.Phases(suite.Events(ns, "again"))
	if !strings.HasPrefix(p, "1:QUEUED 2:QUEUED") || !strings.HasSuffix(p, "2:SUCCEEDED") {
		t.Errorf("events %s; want the failed attempt reported by the next one's QUEUED, then success", p)
	}
}

// TestAbort: deleting a running TaskAction deletes its application and
// reports ABORTED; the TaskAction is then let go.
func TestAbort(t *testing.T) {
	ns := suite.Namespace(t)
	ta := sparkAction(t, ns, "stop", 0, 0)
	enginetest.Create(t, k8s, ta)
	app := waitApp(t, ns, "stop", 1)
	setStatus(t, app, state(sparkv1beta2.ApplicationStateRunning, ""))
	testenv.WaitReason(t, k8s, ns, "stop", flytev1.ConditionProgressing, flytev1.ReasonExecuting)
	if err := k8s.Delete(context.Background(), ta); err != nil {
		t.Fatal(err)
	}
	enginetest.WaitGone(t, k8s, app)
	enginetest.Eventually(t, "the TaskAction to be let go", func() bool {
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(ta), &flytev1.TaskAction{}) != nil
	})
	if p := enginetest.Phases(suite.Events(ns, "stop")); p != "1:QUEUED 1:RUNNING 1:ABORTED" {
		t.Errorf("events %s", p)
	}
}

// TestTimeout: an application still running at the task's deadline is
// deleted and the task times out.
func TestTimeout(t *testing.T) {
	ns := suite.Namespace(t)
	enginetest.Create(t, k8s, sparkAction(t, ns, "slow", 0, 2*time.Second))
	app := waitApp(t, ns, "slow", 1)
	setStatus(t, app, state(sparkv1beta2.ApplicationStateRunning, ""))
	got := testenv.WaitReason(t, k8s, ns, "slow", flytev1.ConditionFailed, flytev1.ReasonTimedOut)
	if es := got.Status.ErrorState; es == nil || es.Code != controller.CodeTimeout {
		t.Errorf("errorState %+v", es)
	}
	enginetest.WaitGone(t, k8s, app)
	if p := enginetest.Phases(suite.Events(ns, "slow")); !strings.HasSuffix(p, "1:TIMED_OUT") {
		t.Errorf("events %s", p)
	}
}

// TestApplicationsAdmitted: the applications of every golden case, and of
// the typed form, are admitted by the operator's CRD (a server-side dry run
// of what the plugin builds).
func TestApplicationsAdmitted(t *testing.T) {
	ns := suite.Namespace(t)
	p, err := spark.NewWith(spark.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	typed := &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: "typed", Namespace: ns},
		Spec: flytev1.TaskActionSpec{RunName: ns, Project: "proj", Domain: "dev", ActionName: "typed", TaskType: spark.ID,
			InputURI: "s3://b/in", RunOutputBase: "s3://b/out",
			Template: &flytev1.TypedTaskTemplate{ID: flytev1.TaskID{Name: "etl", Version: "v1"},
				Container: &flytev1.Container{Image: "spark:3.5", Args: []string{"--in", "{{.input}}"}},
				Config: map[string]string{spark.ConfigKey: `{"applicationType": "SCALA", "mainClass": "a.Main", "mainApplicationFile": "local:///a.jar",
					"driverPod": {"podSpec": {"containers": [{"name": "spark-kubernetes-driver"}], "nodeSelector": {"pool": "driver"}}}}`}}},
	}
	for _, ta := range []*flytev1.TaskAction{sparkAction(t, ns, "flyte", 1, time.Hour), typed} {
		tk, err := task.FromTaskAction(ta)
		if err != nil {
			t.Fatal(err)
		}
		app, err := p.Build(plugin.TaskContext{TaskAction: ta, Task: tk, Attempt: 1, Settings: plugin.Settings{DefaultCPU: "1", DefaultMemory: "1Gi"}})
		if err != nil {
			t.Fatal(err)
		}
		app.OwnerReferences = nil // no TaskAction of that UID exists
		if err := k8s.Create(context.Background(), app, client.DryRunAll); err != nil {
			t.Errorf("%s: the API server refuses the application: %v", ta.Name, err)
		}
	}
}

// TestMissingCRD: in a cluster without the operator's CRD a spark task fails
// at once, naming the kind and what to install.
func TestMissingCRD(t *testing.T) {
	evs := suite.MissingCRD(t, func(ns string) *flytev1.TaskAction { return sparkAction(t, ns, "nocrd", 2, 0) },
		"SparkApplication of sparkoperator.k8s.io/v1beta2", "sparkapplications.sparkoperator.k8s.io")
	if p := enginetest.Phases(evs); p != "1:FAILED" {
		t.Errorf("events %s", p)
	}
}
