// Package enginetest is what the engine plugins' envtest suites
// (pkg/plugin/<engine>/envtest) share: a Suite runs the executor, as
// setup.Setup wires it, against a real kube-apiserver and etcd serving the
// TaskAction CRD and the engine's own CRDs (from the engine's Go module), and
// helpers let the tests play the engine's operator (wait for its objects,
// write their status) and read the events the executor sent. Only tests
// import it; each suite keeps its CRDs, its configuration, its TaskAction and
// its operator's statuses.
package enginetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
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
	"github.com/taskaction/executor/pkg/controller"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/setup"
	"github.com/taskaction/executor/pkg/storage"
)

// Timeout bounds every wait of the suites.
const Timeout = 30 * time.Second

// Suite is one engine's envtest suite.
type Suite struct {
	// Name is the engine's: the configured cluster is Name-envtest.
	Name string
	// NamespacePrefix starts the name of every test's namespace.
	NamespacePrefix string
	// CRDs are the engine's CRD files or directories (ModuleCRDs).
	CRDs func() ([]string, error)
	// Configure adds the engine's own settings to Config's (nil: none).
	Configure func(*config.Config)

	// Env is the running control plane (Run starts it).
	Env *testenv.Env
	// Recorder holds the events the suite's executor sent.
	Recorder events.MemoryRecorder
	// storageDir holds the tests' s3:// bucket "b" (the error.pb the executor
	// reads after a Flyte-form task's attempt ends).
	storageDir string
}

// Run is TestMain's: it starts the control plane with the engine's CRDs and
// the executor, calls ready (the suite started), runs the tests and stops
// both. It returns the exit code, 1 (the reason on stderr) when the suite
// could not start.
func (s *Suite) Run(m *testing.M, ready func()) int {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.Level(2)))) // errors only
	crds, err := s.CRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if s.storageDir, err = os.MkdirTemp("", s.Name+"-envtest-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(s.storageDir)
	s.Env, err = testenv.Start(func(e *envtest.Environment) { e.CRDDirectoryPaths = append(e.CRDDirectoryPaths, crds...) })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = s.Env.Stop() }()
	stop, err := s.startExecutor(s.Env.Config, &s.Recorder)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	if ready != nil {
		ready()
	}
	return m.Run()
}

// ModuleCRDs are paths (CRD files, or a directory of them) in the directory
// of the Go module, the version go.mod requires; each must exist.
func ModuleCRDs(module string, paths ...string) ([]string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	var crds []string
	for _, p := range paths {
		f := filepath.Join(dir, filepath.FromSlash(p))
		if _, err := os.Stat(f); err != nil {
			return nil, err
		}
		crds = append(crds, f)
	}
	return crds, nil
}

// Config is the executor's configuration in the suite: short backoff,
// statuses as they happen, no garbage collection, the bucket in a directory,
// then the engine's settings (Configure).
func (s *Suite) Config() config.Config {
	c := config.Default()
	c.MetricsBindAddress, c.HealthProbeBindAddress = "0", "0"
	c.RequeueDuration = config.Duration{Duration: 100 * time.Millisecond}
	c.GC.Interval = config.Duration{}
	c.Cluster = s.Name + "-envtest"
	c.QueuedStatusDelay = config.Duration{}
	c.Storage = config.StorageConfig{Type: config.StorageTypeLocal, AllowedContainers: []string{"s3://b"}, Schemes: map[string]config.StowConfig{
		"s3": {Kind: config.StowKindLocal, Config: map[string]string{"path": s.storageDir}}}}
	if s.Configure != nil {
		s.Configure(&c)
	}
	return c
}

// startExecutor runs the executor as setup.Setup wires it, against cfg's
// control plane, with its events recorded in rec, until the returned func is
// called.
func (s *Suite) startExecutor(cfg *rest.Config, rec events.Recorder) (func(), error) {
	mgr, err := setup.Setup(s.Config(), cfg, setup.Options{Recorder: rec, SkipNameValidation: true})
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

// Store is the suite's bucket as the executor reads it, closed when t ends.
func (s *Suite) Store(t testing.TB) *storage.Store {
	t.Helper()
	st, err := storage.New(s.Config().Storage)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// Namespace creates a namespace of the suite's for one test.
func (s *Suite) Namespace(t testing.TB) string {
	t.Helper()
	return testenv.Namespace(t, s.Env.Client, s.NamespacePrefix)
}

// Events are the events the suite's executor sent of one action of run ns.
func (s *Suite) Events(ns, action string) []events.Event {
	return EventsOf(&s.Recorder, ns, action)
}

// MissingCRD: in a cluster without the engine's CRDs, the task of the
// TaskAction action makes (in the namespace given) fails at once, naming
// kind and crd (what to install), and is not retried. It returns the task's
// events.
func (s *Suite) MissingCRD(t *testing.T, action func(ns string) *flytev1.TaskAction, kind, crd string) []events.Event {
	t.Helper()
	bare, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bare.Stop() })
	rec := &events.MemoryRecorder{}
	stop, err := s.startExecutor(bare.Config, rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ns := testenv.Namespace(t, bare.Client, s.NamespacePrefix)
	ta := action(ns)
	Create(t, bare.Client, ta)
	got := testenv.WaitReason(t, bare.Client, ns, ta.Name, flytev1.ConditionFailed, flytev1.ReasonPluginNotFound)
	es := got.Status.ErrorState
	if es == nil || es.Code != controller.CodePluginNotFound || !strings.Contains(es.Message, kind) || !strings.Contains(es.Message, crd) {
		t.Errorf("errorState %+v; want the missing kind and its CRD named", es)
	}
	if got.Status.Attempts > 1 {
		t.Errorf("attempts %d: want no retry", got.Status.Attempts)
	}
	return EventsOf(rec, ns, ta.Name)
}

// FlyteAction is a TaskAction as Flyte's actions service applies it for
// tmpl (its metadata the retries and, if not zero, the timeout), the run
// being the namespace so that every test has identities of its own.
func FlyteAction(t testing.TB, ns, name string, retries uint32, timeout time.Duration, tmpl *core.TaskTemplate) *flytev1.TaskAction {
	t.Helper()
	tmpl.Metadata = &core.TaskMetadata{Retries: &core.RetryStrategy{Retries: retries}}
	if timeout > 0 {
		tmpl.Metadata.Timeout = durationpb.New(timeout)
	}
	b, err := proto.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			"flyte.org/project": "proj", "flyte.org/domain": "dev", "flyte.org/run": ns, "flyte.org/action": name}},
		Spec: flytev1.TaskActionSpec{
			RunName: ns, Project: "proj", Domain: "dev", ActionName: name, TaskType: tmpl.GetType(),
			InputURI: "s3://b/" + ns + "/" + name + "/inputs.pb", RunOutputBase: "s3://b/" + ns + "/",
			TaskTemplate: b,
		},
	}
}

// Create creates ta.
func Create(t testing.TB, c client.Client, ta *flytev1.TaskAction) {
	t.Helper()
	if err := c.Create(context.Background(), ta); err != nil {
		t.Fatalf("create TaskAction: %v", err)
	}
}

// Eventually polls cond until it holds, or fails the test after Timeout.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, Timeout, what, cond)
}

// kind is the Go name of the type T, the object's kind.
func kind[T any]() string { return reflect.TypeFor[T]().Name() }

// WaitFor waits until the object key of type T exists and returns it.
func WaitFor[T any, P interface {
	*T
	client.Object
}](t testing.TB, c client.Client, key client.ObjectKey) P {
	t.Helper()
	obj := P(new(T))
	Eventually(t, kind[T]()+" "+key.String(), func() bool { return c.Get(context.Background(), key, obj) == nil })
	return obj
}

// WaitGone waits until obj (its namespace and name) is deleted.
func WaitGone[T any, P interface {
	*T
	client.Object
}](t testing.TB, c client.Client, obj P) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	Eventually(t, kind[T]()+" "+key.String()+" to be deleted", func() bool {
		return apierrors.IsNotFound(c.Get(context.Background(), key, P(new(T))))
	})
}

// SetStatus plays the engine's operator: it writes obj's status as mutate
// leaves the object as stored, retrying on conflicts.
func SetStatus[T any, P interface {
	*T
	client.Object
}](t testing.TB, c client.Client, obj P, mutate func(P)) {
	t.Helper()
	for i := 0; ; i++ {
		cur := P(new(T))
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), cur); err != nil {
			t.Fatalf("get %s: %v", kind[T](), err)
		}
		mutate(cur)
		err := c.Status().Update(context.Background(), cur)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || i > 5 {
			t.Fatalf("update %s status: %v", kind[T](), err)
		}
	}
}

// EventsOf are rec's events of one action of run ns.
func EventsOf(rec *events.MemoryRecorder, ns, action string) []events.Event {
	var out []events.Event
	for _, e := range rec.Events() {
		if e.Run == ns && e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

// Phases is "attempt:PHASE ..." of evs.
func Phases(evs []events.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, fmt.Sprintf("%d:%s", e.Attempt, e.Phase))
	}
	return strings.Join(s, " ")
}

// Collapsed is Phases(evs) with a phase repeated (with a changed message or
// new details) counted once: how many of those the executor sends depends on
// when it looks.
func Collapsed(evs []events.Event) string {
	var s []string
	for _, e := range evs {
		p := fmt.Sprintf("%d:%s", e.Attempt, e.Phase)
		if len(s) == 0 || s[len(s)-1] != p {
			s = append(s, p)
		}
	}
	return strings.Join(s, " ")
}
