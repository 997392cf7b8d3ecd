package envtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sparkv1beta2 "github.com/kubeflow/spark-operator/v2/api/v1beta2"
	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/plugin/spark"
	"github.com/taskaction/executor/pkg/setup"
)

var (
	env      *testenv.Env
	k8s      client.Client
	recorder = &events.MemoryRecorder{}
	// storageDir holds the tests' s3:// bucket "b": the error.pb the
	// executor reads once a Flyte-form task's application ended.
	storageDir string
)

const operatorModule = "github.com/kubeflow/spark-operator/v2"

// operatorCRD is the SparkApplication CRD from the operator's Go module
// (the version go.mod requires).
func operatorCRD() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", operatorModule).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", operatorModule, err)
	}
	f := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases", "sparkoperator.k8s.io_sparkapplications.yaml")
	if _, err := os.Stat(f); err != nil {
		return "", err
	}
	return f, nil
}

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.Level(2)))) // errors only
	os.Exit(run(m))
}

func run(m *testing.M) int {
	crd, err := operatorCRD()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if storageDir, err = os.MkdirTemp("", "spark-envtest-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(storageDir)
	env, err = testenv.Start(func(e *envtest.Environment) { e.CRDDirectoryPaths = append(e.CRDDirectoryPaths, crd) })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client
	stop, err := startExecutor(env.Config, recorder)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	return m.Run()
}

// testConfig is the executor's configuration here: short backoff, statuses
// as they happen, the bucket in a directory, and a plugins.spark section
// with a driver dashboard and a history server.
func testConfig() config.Config {
	c := config.Default()
	c.MetricsBindAddress, c.HealthProbeBindAddress = "0", "0"
	c.RequeueDuration = config.Duration{Duration: 100 * time.Millisecond}
	c.GC.Interval = config.Duration{}
	c.Cluster = "spark-envtest"
	c.QueuedStatusDelay = config.Duration{}
	c.Storage = config.StorageConfig{Type: config.StorageTypeLocal, AllowedContainers: []string{"s3://b"}, Schemes: map[string]config.StowConfig{
		"s3": {Kind: config.StowKindLocal, Config: map[string]string{"path": storageDir}}}}
	c.PluginSections = map[string]any{spark.Section: map[string]any{
		"spark-history-server-url": "http://history",
		"logs": map[string]any{"mixed": map[string]any{
			"kubernetes-template-uri": "http://dashboard/{{ .namespace }}/{{ .podName }}"}},
	}}
	return c
}

// startExecutor runs the executor as setup.Setup wires it, with its events
// recorded in rec, until the returned func is called.
func startExecutor(cfg *rest.Config, rec events.Recorder) (func(), error) {
	mgr, err := setup.Setup(testConfig(), cfg, setup.Options{Recorder: rec, SkipNameValidation: true})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// sparkAction is a TaskAction as Flyte's actions service applies it for a
// PySpark task as flytekit writes it, the run being the namespace so that
// every test has identities of its own.
func sparkAction(t *testing.T, ns, name string, retries uint32, timeout time.Duration) *flytev1.TaskAction {
	t.Helper()
	custom, err := structpb.NewStruct(map[string]any{
		"applicationType":     "PYTHON",
		"mainApplicationFile": "local:///usr/local/bin/entrypoint.py",
		"executorPath":        "/usr/bin/python3",
		"sparkConf":           map[string]any{"spark.executor.instances": "2", "spark.driver.memory": "1000M"},
	})
	if err != nil {
		t.Fatal(err)
	}
	md := &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: retries}}
	if timeout > 0 {
		md.Timeout = durationpb.New(timeout)
	}
	b, err := proto.Marshal(&core.TaskTemplate{
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "wf.spark", Version: "v1"},
		Type: spark.ID, Metadata: md, Custom: custom,
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ghcr.io/flyteorg/spark:v1",
			Args:  []string{"pyflyte-execute", "--inputs", "{{.input}}", "--output-prefix", "{{.outputPrefix}}"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			"flyte.org/project": "proj", "flyte.org/domain": "dev", "flyte.org/run": ns, "flyte.org/action": name}},
		Spec: flytev1.TaskActionSpec{
			RunName: ns, Project: "proj", Domain: "dev", ActionName: name, TaskType: spark.ID,
			InputURI: "s3://b/" + ns + "/" + name + "/inputs.pb", RunOutputBase: "s3://b/" + ns + "/",
			TaskTemplate: b,
		},
	}
}

func namespace(t *testing.T, c client.Client) string {
	t.Helper()
	return testenv.Namespace(t, c, "spark-")
}

func create(t *testing.T, c client.Client, ta *flytev1.TaskAction) {
	t.Helper()
	if err := c.Create(context.Background(), ta); err != nil {
		t.Fatalf("create TaskAction: %v", err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, cond)
}

func waitReason(t *testing.T, c client.Client, ns, name, condType, reason string) *flytev1.TaskAction {
	t.Helper()
	return testenv.WaitReason(t, c, ns, name, condType, reason)
}

// waitApp waits for the SparkApplication of attempt of the TaskAction name.
func waitApp(t *testing.T, ns, name string, attempt int32) *sparkv1beta2.SparkApplication {
	t.Helper()
	app := &sparkv1beta2.SparkApplication{}
	key := client.ObjectKey{Namespace: ns, Name: container.PodName(name, attempt)}
	eventually(t, "SparkApplication "+key.String(), func() bool { return k8s.Get(context.Background(), key, app) == nil })
	return app
}

func waitAppGone(t *testing.T, ns, appName string) {
	t.Helper()
	eventually(t, "SparkApplication "+ns+"/"+appName+" to be deleted", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: appName}, &sparkv1beta2.SparkApplication{})
		return apierrors.IsNotFound(err)
	})
}

// setStatus plays the Spark operator: it writes the application's status as
// mutate leaves it, retrying on conflicts.
func setStatus(t *testing.T, app *sparkv1beta2.SparkApplication, mutate func(*sparkv1beta2.SparkApplicationStatus)) {
	t.Helper()
	for i := 0; ; i++ {
		cur := &sparkv1beta2.SparkApplication{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(app), cur); err != nil {
			t.Fatalf("get application: %v", err)
		}
		mutate(&cur.Status)
		err := k8s.Status().Update(context.Background(), cur)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || i > 5 {
			t.Fatalf("update application status: %v", err)
		}
	}
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

// eventsOf are the recorded events of one action of run ns.
func eventsOf(rec *events.MemoryRecorder, ns, action string) []events.Event {
	var out []events.Event
	for _, e := range rec.Events() {
		if e.Run == ns && e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

// phasesOf is "attempt:PHASE ..." of evs.
func phasesOf(evs []events.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, fmt.Sprintf("%d:%s", e.Attempt, e.Phase))
	}
	return strings.Join(s, " ")
}
