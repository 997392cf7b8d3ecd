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

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
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
	"github.com/taskaction/executor/pkg/plugin/kubeflow"
	"github.com/taskaction/executor/pkg/setup"
)

var (
	env      *testenv.Env
	k8s      client.Client
	recorder = &events.MemoryRecorder{}
	// storageDir holds the tests' s3:// bucket "b" (the error.pb the
	// executor reads after a Flyte-form task's job ends).
	storageDir string
)

const operatorModule = "github.com/kubeflow/training-operator"

// operatorCRDs are the training operator's CRDs of the three job kinds, from
// its Go module (the version go.mod requires).
func operatorCRDs() ([]string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", operatorModule).Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s: %w", operatorModule, err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "manifests", "base", "crds")
	var files []string
	for _, kind := range []string{"pytorchjobs", "tfjobs", "mpijobs"} {
		f := filepath.Join(dir, "kubeflow.org_"+kind+".yaml")
		if _, err := os.Stat(f); err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.Level(2)))) // errors only
	os.Exit(run(m))
}

func run(m *testing.M) int {
	crds, err := operatorCRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if storageDir, err = os.MkdirTemp("", "kubeflow-envtest-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(storageDir)
	env, err = testenv.Start(func(e *envtest.Environment) { e.CRDDirectoryPaths = append(e.CRDDirectoryPaths, crds...) })
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
// as they happen, the bucket in a directory, Kubernetes log links.
func testConfig() config.Config {
	c := config.Default()
	c.MetricsBindAddress, c.HealthProbeBindAddress = "0", "0"
	c.RequeueDuration = config.Duration{Duration: 100 * time.Millisecond}
	c.GC.Interval = config.Duration{}
	c.Cluster = "kubeflow-envtest"
	c.QueuedStatusDelay = config.Duration{}
	c.Storage = config.StorageConfig{Type: config.StorageTypeLocal, AllowedContainers: []string{"s3://b"}, Schemes: map[string]config.StowConfig{
		"s3": {Kind: config.StowKindLocal, Config: map[string]string{"path": storageDir}}}}
	c.TaskLogs = config.TaskLogConfig{IsKubernetesEnabled: true, KubernetesURL: "http://dashboard"}
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

// pytorchAction is a TaskAction as Flyte's actions service applies it for a
// pytorch task (task type version 1, one master and two workers), the run
// being the namespace so that every test has identities of its own.
func pytorchAction(t *testing.T, ns, name string, retries uint32, timeout time.Duration) *flytev1.TaskAction {
	t.Helper()
	custom, err := structpb.NewStruct(map[string]any{
		"masterReplicas": map[string]any{"common": map[string]any{"replicas": 1}},
		"workerReplicas": map[string]any{"common": map[string]any{"replicas": 2}},
		"runPolicy":      map[string]any{"cleanPodPolicy": "CLEANPOD_POLICY_RUNNING"},
	})
	if err != nil {
		t.Fatal(err)
	}
	md := &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: retries}}
	if timeout > 0 {
		md.Timeout = durationpb.New(timeout)
	}
	b, err := proto.Marshal(&core.TaskTemplate{
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "train.ddp", Version: "v1"},
		Type: kubeflow.PyTorch, TaskTypeVersion: 1, Metadata: md, Custom: custom,
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ghcr.io/flyteorg/torch:v1",
			Args:  []string{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			"flyte.org/project": "proj", "flyte.org/domain": "dev", "flyte.org/run": ns, "flyte.org/action": name}},
		Spec: flytev1.TaskActionSpec{
			RunName: ns, Project: "proj", Domain: "dev", ActionName: name, TaskType: kubeflow.PyTorch,
			InputURI: "s3://b/" + ns + "/" + name + "/inputs.pb", RunOutputBase: "s3://b/" + ns + "/",
			TaskTemplate: b,
		},
	}
}

func namespace(t *testing.T, c client.Client) string {
	t.Helper()
	return testenv.Namespace(t, c, "kf-")
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

// waitJob waits for the PyTorchJob of attempt of the TaskAction name.
func waitJob(t *testing.T, ns, name string, attempt int32) *kubeflowv1.PyTorchJob {
	t.Helper()
	job := &kubeflowv1.PyTorchJob{}
	key := client.ObjectKey{Namespace: ns, Name: kubeflow.JobName(name, attempt)}
	eventually(t, "PyTorchJob "+key.String(), func() bool { return k8s.Get(context.Background(), key, job) == nil })
	return job
}

func waitJobGone(t *testing.T, ns, jobName string) {
	t.Helper()
	eventually(t, "PyTorchJob "+ns+"/"+jobName+" to be deleted", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: jobName}, &kubeflowv1.PyTorchJob{})
		return apierrors.IsNotFound(err)
	})
}

// setStatus plays the training operator: it writes the job's status as
// mutate leaves it, retrying on conflicts.
func setStatus(t *testing.T, job *kubeflowv1.PyTorchJob, mutate func(*kubeflowv1.JobStatus)) {
	t.Helper()
	for i := 0; ; i++ {
		cur := &kubeflowv1.PyTorchJob{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), cur); err != nil {
			t.Fatalf("get job: %v", err)
		}
		mutate(&cur.Status)
		err := k8s.Status().Update(context.Background(), cur)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || i > 5 {
			t.Fatalf("update job status: %v", err)
		}
	}
}

// condition appends a condition of typ that is true now, as the operator
// does (the one it replaces goes false).
func condition(typ kubeflowv1.JobConditionType, reason, msg string) func(*kubeflowv1.JobStatus) {
	return func(s *kubeflowv1.JobStatus) {
		now := metav1.Now()
		if s.StartTime == nil {
			s.StartTime = &now
		}
		for i := range s.Conditions {
			if typ != kubeflowv1.JobCreated && s.Conditions[i].Type == kubeflowv1.JobRunning {
				s.Conditions[i].Status = "False"
			}
		}
		s.Conditions = append(s.Conditions, kubeflowv1.JobCondition{Type: typ, Status: "True", Reason: reason, Message: msg,
			LastTransitionTime: now, LastUpdateTime: now})
		if typ == kubeflowv1.JobSucceeded || typ == kubeflowv1.JobFailed {
			s.CompletionTime = &now
		}
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

// phasesOf is "attempt:PHASE ..." of evs, a phase repeated with new details
// once: how many details the executor sees depends on when it looks.
func phasesOf(evs []events.Event) string {
	var s []string
	for _, e := range evs {
		p := fmt.Sprintf("%d:%s", e.Attempt, e.Phase)
		if len(s) == 0 || s[len(s)-1] != p {
			s = append(s, p)
		}
	}
	return strings.Join(s, " ")
}
