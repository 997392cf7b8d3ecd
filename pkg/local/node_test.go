//go:build unix

package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/taskaction/executor/internal/testenv"
)

// startNode starts a control plane and a Node on it, both stopped at the end of the test.
func startNode(t *testing.T, opts ...func(*Node)) (*Node, kubernetes.Interface) {
	t.Helper()
	if testing.Short() {
		t.Skip("envtest: not in -short")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	n := &Node{Config: env.Config, DataDir: t.TempDir(), MaxGrace: 2 * time.Second, Heartbeat: time.Second, Log: testr.New(t)}
	for _, o := range opts {
		o(n)
	}
	stops[n] = runNode(t, n)
	return n, cs
}

// stops are the stop functions of the nodes startNode started (tests are not parallel).
var stops = map[*Node]func(){}

// runNode starts n until the end of the test, or until the returned stop.
func runNode(t *testing.T, n *Node) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("node: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("node did not stop")
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-n.Ready():
	case err := <-done:
		t.Fatalf("node: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("node not ready")
	}
	return stop
}

func managedPod(name string, script string, env ...corev1.EnvVar) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"flyte.org/managed": "true"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "task", Image: "busybox:1.36", Command: []string{"sh", "-c", script}, Env: env,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
		},
	}
}

// waitPod polls until ok says the pod is as wanted, or fails the test.
func waitPod(t *testing.T, cs kubernetes.Interface, name string, what string, ok func(*corev1.Pod, error) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	var lastErr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if ok(p, err) {
			return p
		}
		last, lastErr = p, err
	}
	t.Fatalf("pod %s never %s; last: %v %+v", name, what, lastErr, last)
	return nil
}

func terminal(p *corev1.Pod, err error) bool {
	return err == nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
}

func TestNodeRunsPods(t *testing.T) {
	n, cs := startNode(t)
	ctx := context.Background()

	node, err := cs.CoreV1().Nodes().Get(ctx, DefaultNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(node.Status.Conditions) == 0 || node.Status.Conditions[0].Type != corev1.NodeReady || node.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("node conditions %+v", node.Status.Conditions)
	}
	if node.Status.Allocatable.Cpu().IsZero() || node.Status.Allocatable.Memory().IsZero() || node.Status.Allocatable.Pods().Value() != 8 {
		t.Errorf("allocatable %v", node.Status.Allocatable)
	}

	fieldEnv := corev1.EnvVar{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}
	nsEnv := corev1.EnvVar{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}
	pods := []*corev1.Pod{
		managedPod("fails", "echo hi; exit 3"),
		managedPod("ok", `echo ok $POD $NS $GREETING; pwd`, fieldEnv, nsEnv, corev1.EnvVar{Name: "GREETING", Value: "hello"}),
		managedPod("message", `echo noise; printf custom > "$TERMINATION_MESSAGE_PATH"; exit 1`),
	}
	unmanaged := managedPod("unmanaged", "echo no")
	unmanaged.Labels = nil
	pods = append(pods, unmanaged)
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	failed := waitPod(t, cs, "fails", "ended", terminal)
	if failed.Spec.NodeName != DefaultNodeName {
		t.Errorf("bound to %q", failed.Spec.NodeName)
	}
	if failed.Status.Phase != corev1.PodFailed {
		t.Errorf("phase %s, want Failed", failed.Status.Phase)
	}
	term := failed.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 3 || term.Reason != "Error" || term.Message != "hi\n" {
		t.Errorf("terminated %+v, want exit 3, Error, message from the log", term)
	}
	if failed.Status.StartTime == nil || cond(failed.Status, corev1.PodScheduled) == nil {
		t.Errorf("status %+v", failed.Status)
	}

	ok := waitPod(t, cs, "ok", "ended", terminal)
	if ok.Status.Phase != corev1.PodSucceeded {
		t.Errorf("phase %s, want Succeeded", ok.Status.Phase)
	}
	if term := ok.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" || term.Message != "" {
		t.Errorf("terminated %+v", term)
	}
	logb, err := os.ReadFile(n.LogPath("default", "ok", "task"))
	if err != nil {
		t.Fatal(err)
	}
	wantLog := "ok ok default hello\n" + filepath.Join(n.PodDir("default", "ok"), "work") + "\n"
	if string(logb) != wantLog {
		t.Errorf("log %q, want %q", logb, wantLog)
	}
	// Through the API server, as kubectl logs does.
	viaAPI, err := cs.CoreV1().Pods("default").GetLogs("ok", &corev1.PodLogOptions{Container: "task"}).DoRaw(ctx)
	if err != nil || string(viaAPI) != wantLog {
		t.Errorf("logs through the API server: %q, %v", viaAPI, err)
	}
	tail, err := cs.CoreV1().Pods("default").GetLogs("ok", &corev1.PodLogOptions{TailLines: ptr(int64(1))}).DoRaw(ctx)
	if err != nil || !strings.HasSuffix(wantLog, string(tail)) || strings.Count(string(tail), "\n") != 1 {
		t.Errorf("tailLines=1: %q, %v", tail, err)
	}

	msg := waitPod(t, cs, "message", "ended", terminal)
	if term := msg.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 1 || term.Message != "custom" {
		t.Errorf("terminated %+v, want the message file's content", term)
	}

	if p, err := cs.CoreV1().Pods("default").Get(ctx, "unmanaged", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Errorf("a pod without the managed label was taken: %v %q", err, p.Spec.NodeName)
	}
}

func ptr[T any](v T) *T { return &v }

func TestNodeKillsDeletedPods(t *testing.T) {
	n, cs := startNode(t)
	ctx := context.Background()
	// The shell ignores SIGTERM, so only the SIGKILL after the grace period
	// ends it; its child must die with it.
	p := managedPod("sleeper", `trap "" TERM; sleep 300 & echo $! > child.pid; wait; wait`)
	if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := waitPod(t, cs, "sleeper", "Running", func(p *corev1.Pod, err error) bool {
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
	if c := cond(running.Status, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("Ready = %+v", c)
	}
	cs0 := running.Status.ContainerStatuses[0]
	if cs0.State.Running == nil || !cs0.Ready {
		t.Errorf("container %+v", cs0)
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(cs0.ContainerID, "local://"))
	if err != nil {
		t.Fatalf("containerID %q", cs0.ContainerID)
	}
	childFile := filepath.Join(n.PodDir("default", "sleeper"), "work", "child.pid")
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(childFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if child == 0 || !alive(pid) || !alive(child) {
		t.Fatalf("process %d (alive %v), child %d (alive %v)", pid, alive(pid), child, alive(child))
	}

	start := time.Now()
	if err := cs.CoreV1().Pods("default").Delete(ctx, "sleeper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, "sleeper", "gone", func(_ *corev1.Pod, err error) bool { return apierrors.IsNotFound(err) })
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("gone after %s: the grace period (MaxGrace 2s) was not given", d)
	}
	for _, pid := range []int{pid, child} {
		for deadline := time.Now().Add(5 * time.Second); alive(pid) && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d still alive after the pod was deleted", pid)
		}
	}

	// A pod whose command cannot start fails as a container runtime reports it.
	bad := managedPod("nocommand", "")
	bad.Spec.Containers[0].Command = []string{"/does/not/exist"}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, cs, "nocommand", "ended", terminal)
	if term := got.Status.ContainerStatuses[0].State.Terminated; got.Status.Phase != corev1.PodFailed || term == nil || term.ExitCode != 128 || term.Reason != "StartError" {
		t.Errorf("phase %s terminated %+v", got.Status.Phase, term)
	}
}

func TestNodeWaitsForConfigMap(t *testing.T) {
	_, cs := startNode(t)
	ctx := context.Background()
	p := managedPod("needs-cm", "echo $V", corev1.EnvVar{Name: "V", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}}})
	if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, "needs-cm", "waiting for its ConfigMap", func(p *corev1.Pod, err error) bool {
		return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, cs, "needs-cm", "ended", terminal)
	if got.Status.Phase != corev1.PodSucceeded {
		t.Errorf("phase %s", got.Status.Phase)
	}
}

// alive says whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// With MaxPods 1 a second pod waits for the first; a node that restarts
// reports the pod whose process it lost as failed instead of leaving it Running.
func TestNodeBoundsPodsAndReportsLostOnes(t *testing.T) {
	n, cs := startNode(t, func(n *Node) { n.MaxPods = 1 })
	ctx := context.Background()
	for _, p := range []*corev1.Pod{managedPod("first", "sleep 300"), managedPod("second", "echo second")} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if p.Name == "first" {
			waitPod(t, cs, "first", "Running", func(p *corev1.Pod, err error) bool { return err == nil && p.Status.Phase == corev1.PodRunning })
		}
	}
	// Bound, but no slot: still Pending after a while.
	waitPod(t, cs, "second", "bound", func(p *corev1.Pod, err error) bool { return err == nil && p.Spec.NodeName == DefaultNodeName })
	time.Sleep(time.Second)
	if p, err := cs.CoreV1().Pods("default").Get(ctx, "second", metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodPending {
		t.Fatalf("second pod ran beside the first with MaxPods 1: %v %s", err, p.Status.Phase)
	}
	zero := int64(0)
	if err := cs.CoreV1().Pods("default").Delete(ctx, "first", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if got := waitPod(t, cs, "second", "ended", terminal); got.Status.Phase != corev1.PodSucceeded {
		t.Errorf("second: %s", got.Status.Phase)
	}

	// A restart of the node: the running pod's process dies with the old node.
	if _, err := cs.CoreV1().Pods("default").Create(ctx, managedPod("orphan", "sleep 300"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, cs, "orphan", "Running", func(p *corev1.Pod, err error) bool { return err == nil && p.Status.Phase == corev1.PodRunning })
	stop := runNodeAgain(t, n)
	defer stop()
	got := waitPod(t, cs, "orphan", "ended", terminal)
	if term := got.Status.ContainerStatuses[0].State.Terminated; got.Status.Phase != corev1.PodFailed || term == nil || term.ExitCode != 137 {
		t.Errorf("orphan: %s %+v", got.Status.Phase, term)
	}
}

// runNodeAgain stops the node started by startNode and starts a fresh one
// with the same settings on the same control plane.
func runNodeAgain(t *testing.T, old *Node) func() {
	t.Helper()
	stops[old]()
	n := &Node{Config: old.Config, DataDir: old.DataDir, MaxPods: old.MaxPods, MaxGrace: old.MaxGrace, Heartbeat: old.Heartbeat, Log: old.Log}
	return runNode(t, n)
}
