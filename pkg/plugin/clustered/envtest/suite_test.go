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
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/plugins"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/plugin/clustered"
	"github.com/taskaction/executor/pkg/setup"
)

var (
	env      *testenv.Env
	k8s      client.Client
	recorder = &events.MemoryRecorder{}
	// storageDir holds the tests' s3:// bucket "b" (the error.pb the
	// executor reads after a Flyte-form task's JobSet ends).
	storageDir string
)

const jobSetModule = "sigs.k8s.io/jobset"

// jobSetCRD is the JobSet CRD in its Go module (the version go.mod requires).
func jobSetCRD() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", jobSetModule).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", jobSetModule, err)
	}
	f := filepath.Join(strings.TrimSpace(string(out)), "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml")
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
	crd, err := jobSetCRD()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if storageDir, err = os.MkdirTemp("", "clustered-envtest-"); err != nil {
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
// as they happen, the bucket in a directory, Kubernetes log links.
func testConfig() config.Config {
	c := config.Default()
	c.MetricsBindAddress, c.HealthProbeBindAddress = "0", "0"
	c.RequeueDuration = config.Duration{Duration: 100 * time.Millisecond}
	c.GC.Interval = config.Duration{}
	c.Cluster = "clustered-envtest"
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

// trainAction is a TaskAction as Flyte's actions service applies it for a
// clustered task (two nodes of two processes, restarts as given), the run
// being the namespace so that every test has identities of its own.
func trainAction(t *testing.T, ns, name string, retries uint32, timeout time.Duration, restarts int32) *flytev1.TaskAction {
	t.Helper()
	b, err := protojson.Marshal(&plugins.ClusteredTaskSpec{Replicas: 2, NprocPerNode: 2,
		FailurePolicy: &plugins.ClusterFailurePolicy{MaxRestarts: restarts}})
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
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "train.ddp", Version: "v1"},
		Type: clustered.ID, Metadata: md, Custom: custom,
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image:   "ghcr.io/flyteorg/torch:v1",
			Command: []string{"python", "-m", "flyte.distributed._entrypoint"},
			Args:    []string{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			"flyte.org/project": "proj", "flyte.org/domain": "dev", "flyte.org/run": ns, "flyte.org/action": name}},
		Spec: flytev1.TaskActionSpec{
			RunName: ns, Project: "proj", Domain: "dev", ActionName: name, TaskType: clustered.ID,
			InputURI: "s3://b/" + ns + "/" + name + "/inputs.pb", RunOutputBase: "s3://b/" + ns + "/",
			TaskTemplate: tmpl,
		},
	}
}

func namespace(t *testing.T, c client.Client) string {
	t.Helper()
	return testenv.Namespace(t, c, "clu-")
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

// waitJobSet waits for the JobSet of attempt of the TaskAction name.
func waitJobSet(t *testing.T, ns, name string, attempt int32) *jobsetv1alpha2.JobSet {
	t.Helper()
	js := &jobsetv1alpha2.JobSet{}
	key := client.ObjectKey{Namespace: ns, Name: clustered.JobSetName(name, attempt)}
	eventually(t, "JobSet "+key.String(), func() bool { return k8s.Get(context.Background(), key, js) == nil })
	return js
}

func waitJobSetGone(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, "JobSet "+ns+"/"+name+" to be deleted", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &jobsetv1alpha2.JobSet{})
		return apierrors.IsNotFound(err)
	})
}

// setStatus plays the JobSet controller: it writes the JobSet's status as
// mutate leaves it, retrying on conflicts.
func setStatus(t *testing.T, js *jobsetv1alpha2.JobSet, mutate func(*jobsetv1alpha2.JobSetStatus)) {
	t.Helper()
	for i := 0; ; i++ {
		cur := &jobsetv1alpha2.JobSet{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(js), cur); err != nil {
			t.Fatalf("get JobSet: %v", err)
		}
		mutate(&cur.Status)
		err := k8s.Status().Update(context.Background(), cur)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || i > 5 {
			t.Fatalf("update JobSet status: %v", err)
		}
	}
}

// workersActive: the workers' Job has pods running.
func workersActive(s *jobsetv1alpha2.JobSetStatus) {
	s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: clustered.WorkersReplicatedJob, Active: 1, Ready: 1}}
}

// terminal sets the condition the controller sets at the JobSet's end.
func terminal(typ jobsetv1alpha2.JobSetConditionType, reason, msg string) func(*jobsetv1alpha2.JobSetStatus) {
	return func(s *jobsetv1alpha2.JobSetStatus) {
		s.Conditions = append(s.Conditions, metav1.Condition{Type: string(typ), Status: metav1.ConditionTrue, Reason: reason,
			Message: msg, LastTransitionTime: metav1.Now()})
		s.TerminalState = string(typ)
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

// collapsed is "attempt:PHASE ..." of evs, a phase repeated (a changed
// message) counted once.
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
