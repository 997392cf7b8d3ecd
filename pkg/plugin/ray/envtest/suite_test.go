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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin/ray"
	"github.com/taskaction/executor/pkg/setup"
	"github.com/taskaction/executor/pkg/storage"
)

var (
	env      *testenv.Env
	k8s      client.Client
	recorder = &events.MemoryRecorder{}
	// storageDir holds the tests' s3:// bucket "b", where the executor reads
	// a finished attempt's error.pb.
	storageDir string
	store      *storage.Store
)

const kuberayModule = "github.com/ray-project/kuberay/ray-operator"

// kuberayCRDs are KubeRay's RayJob and RayCluster CRDs from its Go module.
func kuberayCRDs() ([]string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", kuberayModule).Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s: %w", kuberayModule, err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases")
	var files []string
	for _, kind := range []string{"rayjobs", "rayclusters"} {
		f := filepath.Join(dir, "ray.io_"+kind+".yaml")
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
	crds, err := kuberayCRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if storageDir, err = os.MkdirTemp("", "ray-envtest-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(storageDir)
	if store, err = storage.New(testConfig().Storage); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = store.Close() }()
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

// dashboardTemplate is plugins.ray.dashboardURLTemplate here.
const dashboardTemplate = "http://ray/{{ .namespace }}/{{ .rayClusterName }}/#/jobs/{{ .rayJobID }}"

// testConfig is the executor's configuration here: short backoff, statuses
// as they happen, the bucket in a directory, Kubernetes log links, and a Ray
// dashboard link in plugins.ray.
func testConfig() config.Config {
	c := config.Default()
	c.MetricsBindAddress, c.HealthProbeBindAddress = "0", "0"
	c.RequeueDuration = config.Duration{Duration: 100 * time.Millisecond}
	c.GC.Interval = config.Duration{}
	c.Cluster = "ray-envtest"
	c.QueuedStatusDelay = config.Duration{}
	c.Storage = config.StorageConfig{Type: config.StorageTypeLocal, AllowedContainers: []string{"s3://b"}, Schemes: map[string]config.StowConfig{
		"s3": {Kind: config.StowKindLocal, Config: map[string]string{"path": storageDir}}}}
	c.TaskLogs = config.TaskLogConfig{IsKubernetesEnabled: true, KubernetesURL: "http://dashboard"}
	c.PluginSections = map[string]any{"ray": map[string]any{
		"dashboardURLTemplate": map[string]any{"displayName": "Ray Dashboard", "templateUris": []any{dashboardTemplate}},
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

// rayAction is a TaskAction as Flyte's actions service applies it for a ray
// task (a head and one group of two workers), the run being the namespace so
// that every test has identities of its own.
func rayAction(t *testing.T, ns, name string, retries uint32, timeout time.Duration) *flytev1.TaskAction {
	t.Helper()
	b, err := protojson.Marshal(&plugins.RayJob{
		RayCluster: &plugins.RayCluster{
			HeadGroupSpec:   &plugins.HeadGroupSpec{RayStartParams: map[string]string{"num-cpus": "0"}},
			WorkerGroupSpec: []*plugins.WorkerGroupSpec{{GroupName: "workers", Replicas: 2, MinReplicas: 2, MaxReplicas: 2}},
		},
		RuntimeEnvYaml: "pip:\n- numpy\n",
	})
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
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "train.ray", Version: "v1"},
		Type: ray.ID, Metadata: md, Custom: custom,
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "rayproject/ray:2.44.0",
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
			RunName: ns, Project: "proj", Domain: "dev", ActionName: name, TaskType: ray.ID,
			InputURI: "s3://b/" + ns + "/" + name + "/inputs.pb", RunOutputBase: "s3://b/" + ns + "/",
			TaskTemplate: tmpl,
		},
	}
}

func namespace(t *testing.T, c client.Client) string {
	t.Helper()
	return testenv.Namespace(t, c, "ray-")
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

// waitJob waits for the RayJob of attempt of the TaskAction name.
func waitJob(t *testing.T, ns, name string, attempt int32) *rayv1.RayJob {
	t.Helper()
	job := &rayv1.RayJob{}
	key := client.ObjectKey{Namespace: ns, Name: ray.JobName(name, attempt)}
	eventually(t, "RayJob "+key.String(), func() bool { return k8s.Get(context.Background(), key, job) == nil })
	return job
}

func waitJobGone(t *testing.T, ns, jobName string) {
	t.Helper()
	eventually(t, "RayJob "+ns+"/"+jobName+" to be deleted", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: jobName}, &rayv1.RayJob{})
		return apierrors.IsNotFound(err)
	})
}

// setStatus plays KubeRay: it writes the RayJob's status as mutate leaves
// it, retrying on conflicts.
func setStatus(t *testing.T, job *rayv1.RayJob, mutate func(*rayv1.RayJobStatus)) {
	t.Helper()
	for i := 0; ; i++ {
		cur := &rayv1.RayJob{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), cur); err != nil {
			t.Fatalf("get RayJob: %v", err)
		}
		mutate(&cur.Status)
		err := k8s.Status().Update(context.Background(), cur)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || i > 5 {
			t.Fatalf("update RayJob status: %v", err)
		}
	}
}

// kubeRayFinalizer is the finalizer KubeRay puts on every RayJob (it stops
// the Ray job before letting the RayJob go).
const kubeRayFinalizer = "ray.io/rayjob-finalizer"

// holdFinalizer plays KubeRay's finalizer: added at once, removed (the Ray
// job stopped) once the test saw the RayJob being deleted.
func holdFinalizer(t *testing.T, job *rayv1.RayJob) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+kubeRayFinalizer+`"]}}`))
	if err := k8s.Patch(context.Background(), job, patch); err != nil {
		t.Fatalf("add KubeRay's finalizer: %v", err)
	}
}

// releaseFinalizer waits until the RayJob is being deleted, then lets it go.
func releaseFinalizer(t *testing.T, job *rayv1.RayJob) {
	t.Helper()
	eventually(t, "RayJob "+job.Name+" being deleted", func() bool {
		cur := &rayv1.RayJob{}
		return k8s.Get(context.Background(), client.ObjectKeyFromObject(job), cur) == nil && cur.UID == job.UID && cur.DeletionTimestamp != nil
	})
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	cur := job.DeepCopy()
	if err := k8s.Patch(context.Background(), cur, patch); err != nil {
		t.Fatalf("remove KubeRay's finalizer: %v", err)
	}
}

// The statuses KubeRay writes as a RayJob goes: the cluster named and being
// created, the job submitted and running, the end.
func initializing(job *rayv1.RayJob) func(*rayv1.RayJobStatus) {
	return func(s *rayv1.RayJobStatus) {
		now := metav1.Now()
		s.JobDeploymentStatus, s.StartTime = rayv1.JobDeploymentStatusInitializing, &now
		s.RayClusterName, s.JobId = job.Name+"-x7k2p", job.Name+"-q9w4z"
		s.JobStatus = rayv1.JobStatusNew
		s.RayClusterStatus.DesiredWorkerReplicas = 2
	}
}

func running(s *rayv1.RayJobStatus) {
	now := metav1.Now()
	s.JobDeploymentStatus, s.JobStatus = rayv1.JobDeploymentStatusRunning, rayv1.JobStatusRunning
	s.DashboardURL = s.RayClusterName + "-head-svc:8265"
	s.RayJobStatusInfo.StartTime = &now
	s.RayClusterStatus.ReadyWorkerReplicas = 2
}

func ended(deployment rayv1.JobDeploymentStatus, job rayv1.JobStatus, reason rayv1.JobFailedReason, msg string) func(*rayv1.RayJobStatus) {
	return func(s *rayv1.RayJobStatus) {
		now := metav1.Now()
		s.JobDeploymentStatus, s.JobStatus, s.Reason, s.Message = deployment, job, reason, msg
		s.EndTime, s.RayJobStatusInfo.EndTime = &now, &now
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
