package envtest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/setup"
)

var (
	env      *testenv.Env
	k8s      client.Client // direct client for the test's own reads and writes
	recorder = &events.MemoryRecorder{}
	counter  = &requestCounter{}
	mgrStop  context.CancelFunc
	mgrDone  chan struct{}
)

const testRequeue = 100 * time.Millisecond

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.Level(zapLevel()))))
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	if err := startManager(testConfig()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	stopManager()
	_ = env.Stop()
	os.Exit(code)
}

func zapLevel() int8 {
	if os.Getenv("TEST_VERBOSE") != "" {
		return -2
	}
	return 2 // errors only
}

// testConfig is the executor's configuration in this suite: short grace
// periods and backoff keep it fast.
func testConfig() config.Config {
	c := config.Default()
	c.MetricsBindAddress, c.HealthProbeBindAddress = "0", "0"
	c.RequeueDuration = config.Duration{Duration: testRequeue}
	c.ImagePullGracePeriod = config.Duration{Duration: time.Second}
	c.CreateContainerGracePeriod = config.Duration{Duration: time.Second}
	c.DefaultCPU, c.DefaultMemory = "100m", "64Mi"
	c.Cluster = "test-cluster"
	c.MaxConcurrentReconciles = 8
	c.GC.Interval = config.Duration{} // the GC has its own suite; here it would add LISTs to the request counts
	c.KubeAPIQPS, c.KubeAPIBurst = 1000, 2000
	// Statuses as they happen: tests wait for Executing, which the default
	// hold (longer while a busy machine answers writes slowly) would delay;
	// the hold has its own tests (TestAPIRequestsPerTaskAction sets it).
	c.QueuedStatusDelay = config.Duration{}
	return c
}

// startManager runs the executor exactly as Setup wires it, with the events
// recorded in memory and its API requests counted.
func startManager(c config.Config) error {
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(counter.wrap)
	mgr, err := setup.Setup(c, cfg, setup.Options{Recorder: recorder, SkipNameValidation: true})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgrStop = cancel
	mgrDone = make(chan struct{})
	go func() {
		defer close(mgrDone)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return nil
}

func stopManager() {
	mgrStop()
	<-mgrDone
}

// requestCounter counts the executor's API requests by verb and resource.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	total  atomic.Int64
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if req.URL.Query().Get("watch") != "true" {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			c.add(requestKey(req, code))
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// requestKey is "VERB resource[/subresource] code", e.g. "PATCH taskactions/status 200".
func requestKey(req *http.Request, code int) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	res := ""
	for i := 0; i < len(parts); i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			res = parts[i+2]
			if i+4 < len(parts) {
				res += "/" + parts[i+4]
			}
			break
		}
	}
	if res == "" && len(parts) > 0 {
		res = parts[len(parts)-1]
	}
	verb := req.Method
	if verb == http.MethodGet && !strings.Contains(req.URL.Path, "/namespaces/") {
		verb = "LIST"
	}
	return fmt.Sprintf("%s %s %d", verb, res, code)
}

func (c *requestCounter) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[k]++
	c.total.Add(1)
}

func (c *requestCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// --- helpers for tests ---

// namespace creates a fresh namespace for one test.
func namespace(t testing.TB) string { t.Helper(); return testenv.Namespace(t, k8s, "t") }

func validTaskAction(ns, name string) *flytev1.TaskAction {
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"team": "ml"}},
		Spec: flytev1.TaskActionSpec{
			// The run is the namespace: every test (and every -count repetition)
			// has identities of its own, as the executor refuses duplicates.
			RunName: ns, Project: "proj", Domain: "dev", ActionName: name,
			TaskType: "python-task", InputURI: "s3://bucket/run1/" + name + "/inputs.pb", RunOutputBase: "s3://bucket/run1",
			Template: &flytev1.TypedTaskTemplate{
				ID: flytev1.TaskID{Name: "my.task", Version: "v1"},
				Container: &flytev1.Container{
					Image:   "python:3.12",
					Command: []string{"python", "-m", "task"},
					Args:    []string{"--inputs", "{{.input}}", "--outputs", "{{ .outputPrefix }}"},
				},
			},
		},
	}
}

func create(t testing.TB, ta *flytev1.TaskAction) *flytev1.TaskAction {
	t.Helper()
	if err := k8s.Create(context.Background(), ta); err != nil {
		t.Fatalf("create TaskAction: %v", err)
	}
	return ta
}

func get(t testing.TB, ns, name string) *flytev1.TaskAction {
	t.Helper()
	return testenv.GetTaskAction(t, k8s, ns, name)
}

func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, timeout, what, cond)
}

func waitReason(t testing.TB, ns, name, condType, reason string) *flytev1.TaskAction {
	t.Helper()
	return testenv.WaitReason(t, k8s, ns, name, condType, reason)
}

func waitPod(t testing.TB, ns, name string) *corev1.Pod {
	t.Helper()
	return testenv.WaitPod(t, k8s, ns, name)
}

func waitPodGone(t testing.TB, ns, name string) {
	t.Helper()
	eventually(t, 20*time.Second, "pod "+ns+"/"+name+" to be deleted", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
		return apierrors.IsNotFound(err)
	})
}

func pods(t testing.TB, ns string) []corev1.Pod {
	t.Helper()
	l := &corev1.PodList{}
	if err := k8s.List(context.Background(), l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func setPodStatus(t testing.TB, pod *corev1.Pod, mutate func(*corev1.PodStatus)) {
	t.Helper()
	testenv.PatchPodStatus(t, k8s, pod, mutate)
}

func primary(pod *corev1.Pod) string { return pod.Spec.Containers[0].Name }

func podRunning(pod *corev1.Pod) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		now := metav1.Now()
		s.Phase = corev1.PodRunning
		s.StartTime = &now
		s.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		s.ContainerStatuses = []corev1.ContainerStatus{{
			Name: primary(pod), Image: pod.Spec.Containers[0].Image, Ready: true, Started: ptr(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}}
	}
}

func podTerminated(pod *corev1.Pod, phase corev1.PodPhase, exit int32, reason, msg string) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		now := metav1.Now()
		s.Phase = phase
		if s.StartTime == nil {
			s.StartTime = &now
		}
		s.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
		}
		s.ContainerStatuses = []corev1.ContainerStatus{{
			Name: primary(pod), Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exit, Reason: reason, Message: msg, StartedAt: now, FinishedAt: now,
			}},
		}}
	}
}

func podWaiting(pod *corev1.Pod, reason, msg string) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		now := metav1.Now()
		s.Phase = corev1.PodPending
		s.StartTime = &now
		s.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now},
		}
		s.ContainerStatuses = []corev1.ContainerStatus{{
			Name: primary(pod), Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
		}}
	}
}

func ptr[T any](v T) *T { return &v }

// eventsOf returns the recorded events of one action as "attempt:PHASE" strings.
func eventsOf(ns, action string) []events.Event {
	var out []events.Event
	for _, e := range recorder.Events() {
		if e.Action == action && e.Run == ns {
			out = append(out, e)
		}
	}
	return out
}

func phasesOf(evs []events.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, fmt.Sprintf("%d:%s", e.Attempt, e.Phase))
	}
	return strings.Join(s, " ")
}
