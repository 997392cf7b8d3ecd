package envtest

import (
	"os"
	"testing"
	"time"

	sparkv1beta2 "github.com/kubeflow/spark-operator/v2/api/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/internal/enginetest"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/plugin/plugintest"
	"github.com/taskaction/executor/pkg/plugin/spark"
)

var (
	suite = &enginetest.Suite{Name: "spark", NamespacePrefix: "spark-", CRDs: operatorCRD, Configure: configure}
	// k8s is the control plane's client, once the suite runs.
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(suite.Run(m, func() { k8s = suite.Env.Client }))
}

const operatorModule = "github.com/kubeflow/spark-operator/v2"

// operatorCRD is the SparkApplication CRD from the operator's Go module
// (the version go.mod requires).
func operatorCRD() ([]string, error) {
	return enginetest.ModuleCRDs(operatorModule, "config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml")
}

// configure sets a plugins.spark section with a driver dashboard and a
// history server.
func configure(c *config.Config) {
	c.PluginSections = map[string]any{spark.Section: map[string]any{
		"spark-history-server-url": "http://history",
		"logs": map[string]any{"mixed": map[string]any{
			"kubernetes-template-uri": "http://dashboard/{{ .namespace }}/{{ .podName }}"}},
	}}
}

// sparkAction is a TaskAction as Flyte's actions service applies it for a
// PySpark task as flytekit writes it.
func sparkAction(t *testing.T, ns, name string, retries uint32, timeout time.Duration) *flytev1.TaskAction {
	t.Helper()
	return enginetest.FlyteAction(t, ns, name, retries, timeout, &core.TaskTemplate{
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "wf.spark", Version: "v1"},
		Type: spark.ID,
		Custom: plugintest.Struct(t, map[string]any{
			"applicationType":     "PYTHON",
			"mainApplicationFile": "local:///usr/local/bin/entrypoint.py",
			"executorPath":        "/usr/bin/python3",
			"sparkConf":           map[string]any{"spark.executor.instances": "2", "spark.driver.memory": "1000M"},
		}),
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ghcr.io/flyteorg/spark:v1",
			Args:  []string{"pyflyte-execute", "--inputs", "{{.input}}", "--output-prefix", "{{.outputPrefix}}"},
		}},
	})
}

// waitApp waits for the SparkApplication of attempt of the TaskAction name.
func waitApp(t *testing.T, ns, name string, attempt int32) *sparkv1beta2.SparkApplication {
	t.Helper()
	return enginetest.WaitFor[sparkv1beta2.SparkApplication](t, k8s, client.ObjectKey{Namespace: ns, Name: container.PodName(name, attempt)})
}

// setStatus plays the Spark operator: it writes the application's status as
// mutate leaves it.
func setStatus(t *testing.T, app *sparkv1beta2.SparkApplication, mutate func(*sparkv1beta2.SparkApplicationStatus)) {
	t.Helper()
	enginetest.SetStatus(t, k8s, app, func(cur *sparkv1beta2.SparkApplication) { mutate(&cur.Status) })
}

// state moves the application to state as the operator does: the submission
// time on SUBMITTED, the termination time and the application's ID at its
// end.
func state(s sparkv1beta2.ApplicationStateType, msg string) func(*sparkv1beta2.SparkApplicationStatus) {
	return func(st *sparkv1beta2.SparkApplicationStatus) {
		now := metav1.Now()
		st.AppState = sparkv1beta2.ApplicationState{State: s, ErrorMessage: msg}
		switch s {
		case sparkv1beta2.ApplicationStateSubmitted:
			st.LastSubmissionAttemptTime = now
			st.SubmissionAttempts++
		case sparkv1beta2.ApplicationStateRunning:
			st.ExecutionAttempts++
		case sparkv1beta2.ApplicationStateCompleted, sparkv1beta2.ApplicationStateFailed:
			st.TerminationTime = now
			st.SparkApplicationID = "spark-0123"
		}
	}
}

// driver names the driver's pod and UI, as the operator does once it runs.
func driver(podName, ui string) func(*sparkv1beta2.SparkApplicationStatus) {
	return func(st *sparkv1beta2.SparkApplicationStatus) {
		st.DriverInfo.PodName, st.DriverInfo.WebUIIngressAddress = podName, ui
	}
}
