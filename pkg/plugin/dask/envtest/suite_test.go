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

	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/encoding/protojson"
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

	daskv1 "github.com/dask/dask-kubernetes/v2023/dask_kubernetes/operator/go_client/pkg/apis/kubernetes.dask.org/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin/dask"
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

const operatorModule = "github.com/dask/dask-kubernetes/v2023"

// operatorCRDs is the directory of the Dask operator's CRDs in its Go module
// (the version go.mod requires): the generated CRDs its Helm chart installs
// (customresources/ holds only their templates).
func operatorCRDs() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", operatorModule).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", operatorModule, err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "dask_kubernetes", "operator", "deployment", "helm", "dask-kubernetes-operator", "crds")
	if _, err := os.Stat(filepath.Join(dir, "daskjob.yaml")); err != nil {
		return "", err
	}
	return dir, nil
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
	if storageDir, err = os.MkdirTemp("", "dask-envtest-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(storageDir)
	env, err = testenv.Start(func(e *envtest.Environment) { e.CRDDirectoryPaths = append(e.CRDDirectoryPaths, crds) })
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
// as they happen, the bucket in a directory, and plugins.dask's links (the
// Kubernetes one and a dashboard).
func testConfig() config.Config {
	c := config.Default()
	c.MetricsBindAddress, c.HealthProbeBindAddress = "0", "0"
	c.RequeueDuration = config.Duration{Duration: 100 * time.Millisecond}
	c.GC.Interval = config.Duration{}
	c.Cluster = "dask-envtest"
	c.QueuedStatusDelay = config.Duration{}
	c.Storage = config.StorageConfig{Type: config.StorageTypeLocal, AllowedContainers: []string{"s3://b"}, Schemes: map[string]config.StowConfig{
		"s3": {Kind: config.StowKindLocal, Config: map[string]string{"path": storageDir}}}}
	c.PluginSections = map[string]any{"dask": map[string]any{"logs": map[string]any{
		"kubernetes-enabled": true, "kubernetes-template-uri": "http://dashboard/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}",
		"templates": []any{map[string]any{"displayName": "Dask Dashboard", "linkType": "dashboard",
			"templateUris": []any{"http://dask/{{ .namespace }}/{{ .generatedName }}/status"}}},
	}}}
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

// daskAction is a TaskAction as Flyte's actions service applies it for a
// dask task (two workers), the run being the namespace so that every test
// has identities of its own.
func daskAction(t *testing.T, ns, name string, retries uint32, timeout time.Duration) *flytev1.TaskAction {
	t.Helper()
	b, err := protojson.Marshal(&plugins.DaskJob{Workers: &plugins.DaskWorkerGroup{NumberOfWorkers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	custom := &structpb.Struct{}
	if err := protojson.Unmarshal(b, custom); err != nil {
		t.Fatal(err)
	}
	md := &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: retries}}
	if timeout > 0 {
		md.Timeout = durationpb.New(timeout)
	}
	tmpl, err := proto.Marshal(&core.TaskTemplate{
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "wf.dask_sum", Version: "v1"},
		Type: dask.ID, Metadata: md, Custom: custom,
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "ghcr.io/flyteorg/dask:v1",
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
			RunName: ns, Project: "proj", Domain: "dev", ActionName: name, TaskType: dask.ID,
			InputURI: "s3://b/" + ns + "/" + name + "/inputs.pb", RunOutputBase: "s3://b/" + ns + "/",
			TaskTemplate: tmpl,
		},
	}
}

func namespace(t *testing.T, c client.Client) string {
	t.Helper()
	return testenv.Namespace(t, c, "dask-")
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

// waitJob waits for the DaskJob of attempt of the TaskAction name.
func waitJob(t *testing.T, ns, name string, attempt int32) *daskv1.DaskJob {
	t.Helper()
	job := &daskv1.DaskJob{}
	key := client.ObjectKey{Namespace: ns, Name: dask.JobName(name, attempt)}
	eventually(t, "DaskJob "+key.String(), func() bool { return k8s.Get(context.Background(), key, job) == nil })
	return job
}

func waitJobGone(t *testing.T, ns, jobName string) {
	t.Helper()
	eventually(t, "DaskJob "+ns+"/"+jobName+" to be deleted", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: jobName}, &daskv1.DaskJob{})
		return apierrors.IsNotFound(err)
	})
}

// setStatus plays the Dask operator: it writes the job's status as mutate
// leaves it, retrying on conflicts.
func setStatus(t *testing.T, job *daskv1.DaskJob, mutate func(*daskv1.DaskJobStatus)) {
	t.Helper()
	for i := 0; ; i++ {
		cur := &daskv1.DaskJob{}
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

// The operator's steps: the job created, its cluster and runner pod
// created, the runner running (its start recorded), the runner's end.
func jobCreated(s *daskv1.DaskJobStatus) { s.JobStatus = daskv1.DaskJobCreated }

func clusterCreated(name string) func(*daskv1.DaskJobStatus) {
	return func(s *daskv1.DaskJobStatus) {
		s.JobStatus, s.ClusterName, s.JobRunnerPodName = daskv1.DaskJobClusterCreated, name, name+"-runner"
	}
}

func running(s *daskv1.DaskJobStatus) {
	s.JobStatus, s.StartTime = daskv1.DaskJobRunning, metav1.Now()
}

func ended(status daskv1.JobStatus) func(*daskv1.DaskJobStatus) {
	return func(s *daskv1.DaskJobStatus) { s.JobStatus, s.EndTime = status, metav1.Now() }
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

// collapsed is phasesOf(evs) with repeats of a phase (a changed message)
// counted once.
func collapsed(evs []events.Event) string {
	var s []string
	for _, e := range evs {
		p := fmt.Sprintf("%d:%s", e.Attempt, e.Phase)
		if len(s) == 0 || s[len(s)-1] != p {
			s = append(s, p)
		}
	}
	return strings.Join(s, " ")
}
