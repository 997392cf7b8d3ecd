// Package local holds black-box tests of `executor local`: the binary is
// built, run headless as a user would run it, used through the kubeconfig it
// prints, stopped with SIGINT, and checked to leave nothing running.
package local

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/local"
	"github.com/taskaction/executor/pkg/setup"
)

var (
	binary string
	root   string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if root, err = testenv.Root(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "executor-local-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	binary = filepath.Join(tmp, "executor")
	build := exec.Command("go", "build", "-o", binary, "./cmd/executor")
	build.Dir = root
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/executor: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// ports are free loopback ports for every listener, so that the test does
// not collide with anything else on the machine.
type ports struct{ metrics, probes, events, cache string }

func newPorts(t *testing.T) ports {
	t.Helper()
	// All four listen at once, so that the kernel cannot hand out one port
	// twice (picked and released one by one, two of them were once the same).
	var ps [4]string
	for i := range ps {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		ps[i] = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	}
	return ports{ps[0], ps[1], ps[2], ps[3]}
}

func (p ports) args() []string {
	return []string{
		"--executor.metricsBindAddress=127.0.0.1:" + p.metrics,
		"--executor.healthProbeBindAddress=127.0.0.1:" + p.probes,
		"--executor.eventsServiceURL=http://127.0.0.1:" + p.events,
		"--executor.cacheServiceURL=http://127.0.0.1:" + p.cache,
	}
}

func childEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "KUBECONFIG" || k == "KUBEBUILDER_ASSETS" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runToEnd runs the binary, which must exit within 4 minutes.
func runToEnd(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = root
	cmd.Env = childEnv(env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("run %v: %v\n%s", args, err, out)
	return "", -1
}

// Bad starts fail fast, before any control plane, and say what to do.
func TestBadStarts(t *testing.T) {
	p := newPorts(t)
	taken, err := net.Listen("tcp", "127.0.0.1:"+p.events)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"port in use", nil, append([]string{"local", "--data-dir", t.TempDir()}, p.args()...),
			"port " + p.events + " (events service) is already in use"},
		{"no control plane binaries", []string{"KUBEBUILDER_ASSETS=" + t.TempDir()},
			append([]string{"local", "--data-dir", t.TempDir()}, newPorts(t).args()...), "kube-apiserver not found in"},
		{"data directory not writable", nil, append([]string{"local", "--data-dir", filepath.Join(file, "data")}, newPorts(t).args()...),
			"data directory " + filepath.Join(file, "data") + " cannot be created"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runToEnd(t, tc.env, tc.args...)
			if code != 1 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output:\n%s\nwant exit 1 and %q", code, out, tc.want)
			}
			if tc.name == "no control plane binaries" && !strings.Contains(out, "run `make envtest`") {
				t.Errorf("no hint to build the binaries:\n%s", out)
			}
		})
	}
}

// TestLocal is the acceptance test: start `executor local` headless,
// apply a sample through the printed kubeconfig, wait for Succeeded, stop it
// with SIGINT, and check that nothing it started is left running.
func TestLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: not in -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("finds the processes left behind in /proc: Linux only")
	}
	dataDir := t.TempDir()
	// The control plane's state and certificates go to TMPDIR: it must be empty again at the end.
	tmpDir := t.TempDir()
	p := newPorts(t)
	cmd := exec.Command(binary, append([]string{"local", "--data-dir", dataDir}, p.args()...)...)
	cmd.Dir = root
	cmd.Env = childEnv("TMPDIR=" + tmpDir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	out := &syncBuffer{}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			_, _ = fmt.Fprintln(out, sc.Text())
			if strings.HasPrefix(sc.Text(), local.ReadyLine) {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			logs, _ := os.ReadFile(filepath.Join(dataDir, "executor.log"))
			t.Logf("stdout:\n%s\nstderr:\n%s\nexecutor.log (last 8KiB):\n%s", out, tail(stderr.String(), 4096), tail(string(logs), 8192))
		}
	}()

	select {
	case <-ready:
	case err := <-exited:
		stopped = true
		t.Fatalf("executor local exited before ready: %v", err)
	case <-time.After(3 * time.Minute):
		t.Fatal("executor local not ready within 3m")
	}
	kubeconfig := filepath.Join(dataDir, "kubeconfig")
	if !strings.Contains(out.String(), "export KUBECONFIG="+kubeconfig) || !strings.Contains(out.String(), "logs in "+filepath.Join(dataDir, "executor.log")) {
		t.Errorf("kubeconfig or log path not printed:\n%s", out)
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(restCfg, client.Options{Scheme: setup.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(restCfg)
	ctx := context.Background()

	// Everything it started, found while it runs: after it exits, orphans
	// would be re-parented and no longer recognisable by their parent.
	if inUse, _ := os.ReadDir(tmpDir); len(inUse) == 0 {
		t.Errorf("the control plane keeps nothing in TMPDIR %s: the check that it is removed proves nothing", tmpDir)
	}
	descendantsBefore := descendants(cmd.Process.Pid)
	if len(descendantsBefore) < 2 {
		t.Errorf("expected etcd and kube-apiserver below the executor, found %v", descendantsBefore)
	}

	// Probes, and metrics behind TokenReview/SubjectAccessReview done as the executor's own user.
	if code := httpGet(t, "http://127.0.0.1:"+p.probes+"/readyz", ""); code != 200 {
		t.Errorf("readyz: %d", code)
	}
	tok, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "metrics-scraper", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of metrics-scraper: %v", err)
	}
	if code := httpGet(t, "https://127.0.0.1:"+p.metrics+"/metrics", tok.Status.Token); code != 200 {
		t.Errorf("metrics with the scraper's token: %d", code)
	}
	if code := httpGet(t, "https://127.0.0.1:"+p.metrics+"/metrics", ""); code != 401 {
		t.Errorf("metrics without a token: %d, want 401", code)
	}

	ta := loadSample(t, "flyte_v1_taskaction_success.yaml")
	// The executor rejects a TaskAction without these (InvalidSpec); if the
	// sample lacks them, this test is about executor local, not the sample.
	if ta.Spec.InputURI == "" || ta.Spec.RunOutputBase == "" {
		t.Logf("config/samples/flyte_v1_taskaction_success.yaml lacks inputUri or runOutputBase, which the executor requires: filled in here")
		ta.Spec.InputURI, ta.Spec.RunOutputBase = "s3://my-bucket/sample-run/hello/inputs.pb", "s3://my-bucket/sample-run/"
	}
	if err := c.Create(ctx, ta); err != nil {
		t.Fatal(err)
	}
	// The control plane calls the executor's admission webhooks: the finalizer
	// comes with the create.
	if !slices.Contains(ta.Finalizers, flytev1.Finalizer) {
		t.Errorf("finalizers %v at creation, want %s from the webhook", ta.Finalizers, flytev1.Finalizer)
	}
	got := waitTaskAction(t, c, ta.Name, 2*time.Minute)
	if !meta.IsStatusConditionTrue(got.Status.Conditions, flytev1.ConditionSucceeded) {
		t.Fatalf("TaskAction %s ended %+v, want Succeeded", ta.Name, got.Status.Conditions)
	}
	// Its pod ran here: kubectl logs works through the API server.
	logs, err := cs.CoreV1().Pods("default").GetLogs(got.Name+"-0", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || string(logs) != "hello\n" {
		t.Errorf("logs of %s: %q, %v", got.Name+"-0", logs, err)
	}

	// A task still running at shutdown must be killed with everything else.
	sleeper := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default", Labels: map[string]string{setup.ManagedLabel: "true"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "task", Image: "busybox", Command: []string{"sh", "-c", "sleep 300 & wait"},
		}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, sleeper, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var taskPID int
	for deadline := time.Now().Add(30 * time.Second); taskPID == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "sleeper", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 {
			taskPID, _ = strconv.Atoi(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "local://"))
		}
	}
	if taskPID == 0 {
		t.Fatal("the sleeper pod never ran")
	}
	time.Sleep(200 * time.Millisecond) // let the shell start its child
	all := descendants(cmd.Process.Pid)
	if _, ok := all[taskPID]; !ok {
		t.Errorf("task process %d is not below the executor (%v)", taskPID, all)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("exit after SIGINT: %v", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("executor local did not stop within 90s of SIGINT")
	}
	if !strings.Contains(out.String(), "executor local: stopping") {
		t.Errorf("no stopping line:\n%s", out)
	}
	for pid, start := range all {
		if st, ok := startTime(pid); ok && st == start && !zombie(pid) {
			t.Errorf("process %d (%s) is still running after executor local stopped", pid, cmdline(pid))
		}
	}
	if left, err := os.ReadDir(tmpDir); err != nil || len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("left in TMPDIR: %v %v", names, err)
	}
}

func httpGet(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The metrics certificate is self-signed.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func loadSample(t *testing.T, name string) *flytev1.TaskAction {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "config", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	ta := &flytev1.TaskAction{}
	if err := yaml.Unmarshal(b, ta); err != nil {
		t.Fatal(err)
	}
	ta.Namespace = "default"
	return ta
}

func waitTaskAction(t *testing.T, c client.Client, name string, d time.Duration) *flytev1.TaskAction {
	t.Helper()
	ta := &flytev1.TaskAction{}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, ta); err != nil {
			continue
		}
		if meta.IsStatusConditionTrue(ta.Status.Conditions, flytev1.ConditionSucceeded) ||
			meta.IsStatusConditionTrue(ta.Status.Conditions, flytev1.ConditionFailed) {
			return ta
		}
	}
	t.Fatalf("TaskAction %s not terminal within %s: %+v", name, d, ta.Status)
	return nil
}

// descendants are the processes below pid, each with its start time (so a
// reused pid is not mistaken for a survivor).
func descendants(pid int) map[int]uint64 {
	parents := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields(p); len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			parents[p] = pp
		}
	}
	out := map[int]uint64{}
	for p := range parents {
		for q, hops := parents[p], 0; q > 1 && hops < 64; q, hops = parents[q], hops+1 {
			if q == pid {
				if st, ok := startTime(p); ok {
					out[p] = st
				}
				break
			}
		}
	}
	return out
}

// statFields are the fields of /proc/pid/stat after the command name: state, ppid, ...
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

func startTime(pid int) (uint64, bool) {
	f := statFields(pid)
	if len(f) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64) // field 22 of stat
	return v, err == nil
}

func zombie(pid int) bool {
	f := statFields(pid)
	return len(f) > 0 && f[0] == "Z"
}

func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.ReplaceAll(string(b), "\x00", " ")
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// writeSamples copies config/samples into a directory, filling in the fields
// the executor requires when a sample lacks them.
func writeSamples(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "flyte_v1_taskaction_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	for _, f := range files {
		ta := loadSample(t, filepath.Base(f))
		if ta.Spec.InputURI == "" || ta.Spec.RunOutputBase == "" {
			t.Logf("%s lacks inputUri or runOutputBase, which the executor requires: filled in here", filepath.Base(f))
			ta.Spec.InputURI = "s3://my-bucket/sample-run/" + ta.Name + "/inputs.pb"
			ta.Spec.RunOutputBase = "s3://my-bucket/sample-run/"
		}
		b, err := yaml.Marshal(ta)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDemo runs --demo to its end: a success, a failure after all its
// retries, and a cached task run twice, the second a cache hit; exit 0 only
// when each ended as expected.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: not in -short")
	}
	samples := writeSamples(t)
	args := append([]string{"local", "--demo", "--demo-timeout", "2m", "--samples-dir", samples, "--data-dir", t.TempDir()}, newPorts(t).args()...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = root
	cmd.Env = childEnv()
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := stdout.String()
	if err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr (last 4KiB):\n%s", err, out, tail(stderr.String(), 4096))
	}
	for _, want := range []string{"NAME", "PHASE", "ATTEMPT", "AGE", "hello", "Succeeded/Completed", "exit-3", "Failed/PermanentFailure", "cached-again", "HIT",
		"demo: every sample reached its expected end", "executor local: stopping"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output:\n%s", want, out)
		}
	}
}

// TestDemoSamples runs --demo on config/samples as they are, cached task
// included: what `make local --demo` shows a user.
func TestDemoSamples(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: not in -short")
	}
	args := append([]string{"local", "--demo", "--demo-timeout", "2m", "--data-dir", t.TempDir()}, newPorts(t).args()...)
	out, code := runToEnd(t, nil, args...)
	if code != 0 {
		t.Errorf("demo on config/samples: exit %d\n%s", code, tail(out, 4096))
	}
}
