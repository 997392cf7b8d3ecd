// Package e2e runs the executor as Setup wires it against a real API server,
// a real events service and a real cache service, and checks what reaches them.
package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/eventsvc"
	"github.com/taskaction/executor/pkg/setup"
)

var (
	env *testenv.Env
	k8s client.Client
)

const requeue = 200 * time.Millisecond

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.Level(2))))
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// startExecutor runs the executor, limited to ns, against the given services
// until the test ends.
func startExecutor(t testing.TB, ns, eventsURL, cacheURL string) {
	t.Helper()
	startExecutorWith(t, ns, eventsURL, cacheURL, nil)
}

// startExecutorWith is startExecutor with the configuration adjusted by mutate.
func startExecutorWith(t testing.TB, ns, eventsURL, cacheURL string, mutate func(*config.Config)) {
	t.Helper()
	c := config.Default()
	c.MetricsBindAddress, c.HealthProbeBindAddress = "0", "0"
	c.EventsServiceURL, c.CacheServiceURL = eventsURL, cacheURL
	c.RequeueDuration = config.Duration{Duration: requeue}
	c.GC.Interval = config.Duration{}
	c.Cluster = "e2e"
	// Statuses as they happen: tests wait for Executing, which the default
	// hold (longer while a busy machine answers writes slowly) would delay.
	c.QueuedStatusDelay = config.Duration{}
	// The tests' s3:// buckets are directories: what the executor reads there
	// (error.pb) is what a test wrote, never a cloud request.
	c.Storage = config.StorageConfig{Type: config.StorageTypeLocal, AllowedContainers: []string{"s3://b"}, Schemes: map[string]config.StowConfig{
		"s3": {Kind: config.StowKindLocal, Config: map[string]string{"path": t.TempDir()}}}}
	if mutate != nil {
		mutate(&c)
	}
	mgr, err := setup.Setup(c, env.Config, setup.Options{Namespaces: []string{ns}, SkipNameValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func namespace(t testing.TB) string { t.Helper(); return testenv.Namespace(t, k8s, "e2e-") }

// taskAction is a valid TaskAction of run `run` (one run per test keeps the
// events of tests apart).
func taskAction(ns, run, name string) *flytev1.TaskAction {
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: flytev1.TaskActionSpec{
			RunName: run, Project: "proj", Domain: "dev", ActionName: name, TaskType: "container",
			InputURI: "s3://b/" + run + "/" + name + "/inputs.pb", RunOutputBase: "s3://b/" + run,
			Template: &flytev1.TypedTaskTemplate{
				ID:        flytev1.TaskID{Name: "task." + name, Version: "v1"},
				Container: &flytev1.Container{Image: "busybox", Command: []string{"true"}},
			},
		},
	}
}

func create(t testing.TB, ta *flytev1.TaskAction) {
	t.Helper()
	if err := k8s.Create(context.Background(), ta); err != nil {
		t.Fatalf("create %s: %v", ta.Name, err)
	}
}

func get(t testing.TB, ns, name string) *flytev1.TaskAction {
	t.Helper()
	return testenv.GetTaskAction(t, k8s, ns, name)
}

func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, timeout, what, cond)
}

func waitReason(t testing.TB, ns, name, typ, reason string) *flytev1.TaskAction {
	t.Helper()
	return testenv.WaitReason(t, k8s, ns, name, typ, reason)
}

func waitPod(t testing.TB, ns, name string) *corev1.Pod {
	t.Helper()
	return testenv.WaitPod(t, k8s, ns, name)
}

func podCount(t testing.TB, ns string) int {
	t.Helper()
	l := &corev1.PodList{}
	if err := k8s.List(context.Background(), l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// kubelet plays the kubelet for one pod: Running, or terminated with exit.
func kubelet(t testing.TB, pod *corev1.Pod, phase corev1.PodPhase, exit int32) {
	t.Helper()
	testenv.PatchPodStatus(t, k8s, pod, func(st *corev1.PodStatus) {
		now := metav1.Now()
		st.Phase = phase
		st.StartTime = &now
		cs := corev1.ContainerStatus{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image}
		switch phase {
		case corev1.PodRunning:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		default:
			reason := "Completed"
			if exit != 0 {
				reason = "Error"
			}
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: exit, Reason: reason, StartedAt: now, FinishedAt: now}
		}
		st.ContainerStatuses = []corev1.ContainerStatus{cs}
	})
}

// stored returns the events the service stored for one action, as
// "attempt:PHASE" in the order they were stored.
func stored(t testing.TB, st eventsvc.Store, run, action string) ([]events.Event, string) {
	t.Helper()
	all, err := st.List(context.Background(), eventsvc.Query{Run: run, Action: action, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Seq < all[j].Seq })
	var evs []events.Event
	var s []string
	for _, se := range all {
		ev := events.FromProto(se.Event)
		if ev.Action != action {
			continue
		}
		evs = append(evs, ev)
		s = append(s, fmt.Sprintf("%d:%s", ev.Attempt, ev.Phase))
	}
	return evs, strings.Join(s, " ")
}
