// Package manager holds black-box tests of the executor binary: it is built
// once, then run as a process against a real kube-apiserver (envtest).
package manager

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/taskaction/executor/internal/testenv"
)

var (
	env        *testenv.Env
	clientset  *kubernetes.Clientset
	binary     string // the executor built for this run
	kubeconfig string // admin (system:masters) kubeconfig of the envtest API server
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "executor-manager-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)

	root, err := testenv.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binary = filepath.Join(tmp, "executor")
	build := exec.Command("go", "build", "-o", binary, "./cmd/executor")
	build.Dir = root
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/executor: %v\n%s", err, out)
		return 1
	}

	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	// The executor's metrics filter sends TokenReviews and SubjectAccessReviews
	// as the executor itself, so it runs as an admin of the test cluster.
	admin, err := env.AddUser(envtest.User{Name: "executor-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "add admin user:", err)
		return 1
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "admin kubeconfig:", err)
		return 1
	}
	kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	clientset, err = kubernetes.NewForConfig(env.Config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// childEnv is the environment without anything that would point the executor
// at another cluster or namespace than the test says.
func childEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "KUBECONFIG", "POD_NAMESPACE", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT":
			continue
		}
		out = append(out, kv)
	}
	return append(out, extra...)
}

// runCommand runs the binary to completion and returns its output and exit code.
func runCommand(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = childEnv()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return o.String(), e.String(), 0
	case errors.As(err, &ee):
		return o.String(), e.String(), ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
		return "", "", -1
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer collects the child's log while the test reads it.
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

// process is a running executor manager.
type process struct {
	cmd         *exec.Cmd
	log         *syncBuffer
	done        chan struct{}
	waitErr     error
	metricsAddr string
	probeAddr   string
}

// startExecutor runs the manager on free loopback ports and waits until /readyz
// answers 200. Later args override the port flags. It is stopped at cleanup.
func startExecutor(t *testing.T, extraEnv []string, args ...string) *process {
	t.Helper()
	p := &process{
		log:         &syncBuffer{},
		done:        make(chan struct{}),
		metricsAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		probeAddr:   "127.0.0.1:" + strconv.Itoa(freePort(t)),
	}
	all := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--executor.metricsBindAddress=" + p.metricsAddr,
		"--executor.healthProbeBindAddress=" + p.probeAddr,
		"--executor.webhookPort=" + strconv.Itoa(freePort(t)),
	}, args...)
	p.cmd = exec.Command(binary, all...)
	p.cmd.Env = childEnv(extraEnv...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("executor log:\n%s", p.log.String())
		}
	})
	p.waitReady(t)
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if p.exited() {
			t.Fatalf("executor exited before it was ready: %v\n%s", p.waitErr, p.log.String())
		}
		resp, err := http.Get("http://" + p.probeAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("executor not ready within 60s:\n%s", p.log.String())
}

// terminate sends SIGTERM and returns the exit code, or fails after 30s.
func (p *process) terminate(t *testing.T) int {
	t.Helper()
	if !p.exited() {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("executor did not stop within 30s of SIGTERM:\n%s", p.log.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *process) stop(t *testing.T) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// metricsGet GETs https://<metrics>/metrics with an optional bearer token and
// returns the status code, retrying while the server is not yet listening.
func (p *process) metricsGet(t *testing.T, token string) (int, string) {
	t.Helper()
	c := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // self-signed by default
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+p.metricsAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	var lastErr error
	for i := 0; i < 100; i++ {
		resp, err := c.Do(req)
		if err != nil {
			lastErr = err
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, body.String()
	}
	t.Fatalf("GET /metrics: %v", lastErr)
	return 0, ""
}
