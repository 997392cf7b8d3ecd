package webhook_test

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/local"
	"github.com/taskaction/executor/pkg/setup"
)

var env *testenv.Env

// TestMain starts a control plane with the executor's real webhook
// configurations (config/webhook/manifests.yaml) installed by envtest, which
// points them at a local port and a certificate directory of its own.
func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(false)))
	if fuzzingOnly() {
		// FuzzAdmission calls the handlers directly: no control plane (make
		// fuzz runs it with -run '^$', and each fuzz worker runs TestMain).
		os.Exit(m.Run())
	}
	var err error
	env, err = testenv.Start(func(e *envtest.Environment) {
		root, _ := testenv.Root()
		e.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")},
		}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

// fuzzingOnly says whether this process only fuzzes: a fuzz worker, or a
// fuzzing run that runs no test.
func fuzzingOnly() bool {
	flag.Parse()
	value := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	return value("test.fuzzworker") == "true" || value("test.fuzz") != "" && value("test.run") == "^$"
}

// webhookConfig is the configuration of a standalone webhook server on the
// port and certificates envtest set up: only the webhooks run, so nothing
// but them can change an object in these tests.
func webhookConfig() config.Config {
	c := config.Default()
	c.MetricsBindAddress, c.HealthProbeBindAddress = "0", "0"
	o := env.WebhookInstallOptions
	c.WebhookPort = o.LocalServingPort
	c.WebhookCertPath = o.LocalServingCertDir
	c.Webhook.Enabled, c.Webhook.Standalone = true, true
	return c
}

// startWebhook runs the executor (Setup, as `executor webhook` does) until
// the test ends or stop is called, and waits until it answers TLS on addr.
func startWebhook(t *testing.T, c config.Config, opts setup.Options) (stop func()) {
	t.Helper()
	return startExecutor(t, c, env.Config, opts)
}

// startExecutor runs Setup(c, restCfg, opts) until the test ends or stop is
// called; with the webhook on, it waits until the webhook port accepts.
func startExecutor(t *testing.T, c config.Config, restCfg *rest.Config, opts setup.Options) (stop func()) {
	t.Helper()
	opts.SkipNameValidation = true
	mgr, err := setup.Setup(c, restCfg, opts)
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
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	if c.Webhook.Active() {
		waitListening(t, "127.0.0.1:"+strconv.Itoa(c.WebhookPort))
	}
	return stop
}

// startNode runs a local node (pkg/local: a kubelet that runs each pod's
// command as a process) until the test ends.
func startNode(t *testing.T, name string) {
	t.Helper()
	node := &local.Node{Config: env.Config, Name: name, DataDir: t.TempDir(), MaxGrace: 2 * time.Second, Heartbeat: time.Second, LogsAddr: "-", Log: testr.New(t)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
	})
	select {
	case <-node.Ready():
	case err := <-done:
		t.Fatalf("node: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("node not ready")
	}
}

// waitListening waits until a TCP connection to addr is accepted.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "webhook server listening on "+addr, func() bool {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}

// dialCert returns the leaf certificate addr presents.
func dialCert(addr string, protos ...string) (*tls.ConnectionState, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true, NextProtos: protos}) // #nosec G402 -- the test compares the certificate itself
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	st := conn.ConnectionState()
	if len(st.PeerCertificates) == 0 {
		return nil, errors.New("no certificate")
	}
	return &st, nil
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

func taskAction(ns, name string) *flytev1.TaskAction {
	return &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: flytev1.TaskActionSpec{
			RunName: "run-" + name, Project: "proj", Domain: "dev", ActionName: name, TaskType: "container",
			InputURI: "s3://b/" + name + "/inputs.pb", RunOutputBase: "s3://b/" + name,
			Template: &flytev1.TypedTaskTemplate{
				ID:        flytev1.TaskID{Name: "task." + name, Version: "v1"},
				Container: &flytev1.Container{Image: "busybox", Command: []string{"true"}},
			},
		},
	}
}
