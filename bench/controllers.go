package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/local"
)

// controllerProc is the controller under test, running.
type controllerProc struct {
	p          *proc
	metricsURL string
}

// executorDeps is what the executor talks to, kept for a second executor
// process (the deletion phase).
type executorDeps struct {
	// eventsAddr serves the events service's RPCs and its /metrics, which
	// count the Record calls and events (no proxy in their path).
	eventsAddr string
	cacheAddr  string
	config     string // --config file ("" for none)
	svcs       []*proc
	// webhooks are config/webhook's configurations installed pointing at
	// the executor's webhook server (nil: not installed).
	webhooks *envtest.WebhookInstallOptions
}

// args are the executor's flags for what it talks to.
func (d *executorDeps) args() []string {
	a := []string{"--executor.eventsServiceURL=http://" + d.eventsAddr, "--executor.cacheServiceURL=http://" + d.cacheAddr}
	if d.config != "" {
		a = append(a, "--config="+d.config)
	}
	if w := d.webhooks; w != nil {
		a = append(a, webhookArgs(w)...)
	}
	return a
}

// webhookArgs are the executor's flags to serve the webhooks w points the
// API server at.
func webhookArgs(w *envtest.WebhookInstallOptions) []string {
	return []string{"--executor.webhook.enabled=true", "--executor.webhook.host=" + w.LocalServingHost,
		"--executor.webhookPort=" + strconv.Itoa(w.LocalServingPort), "--executor.webhookCertPath=" + w.LocalServingCertDir}
}

// installWebhooks installs config/webhook's configurations as config/default
// deploys them, pointing the API server at a local port (by URL, with a
// generated certificate) for the executor to serve.
func installWebhooks(o options, r *rig) (*envtest.WebhookInstallOptions, error) {
	w := &envtest.WebhookInstallOptions{Paths: []string{filepath.Join(o.Root, "config", "webhook", "manifests.yaml")}, LocalServingHost: "127.0.0.1"}
	if err := w.Install(r.admin); err != nil {
		return nil, fmt.Errorf("install the webhook configurations: %w", err)
	}
	return w, nil
}

func startFloor(ctx context.Context, o options, r *rig, dir string) (*controllerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"floor", "--kubeconfig=" + r.ctrlKC,
		"--metrics-addr=" + addr, "--qps=" + strconv.FormatFloat(o.FloorQPS, 'f', -1, 64), "--burst=" + strconv.Itoa(o.FloorBurst),
		"--workers=" + strconv.Itoa(o.Workers), "--pod=" + o.FloorPod}
	if o.Unrelated > 0 {
		args = append(args, "--namespace="+benchNamespace)
	}
	if o.FloorPprof != "" {
		args = append(args, "--pprof-addr="+o.FloorPprof)
	}
	p, err := startProc(ctx, "floor", filepath.Join(dir, "floor.log"), self, args...)
	if err != nil {
		return nil, err
	}
	cp := &controllerProc{p: p, metricsURL: "http://" + addr + "/metrics"}
	if err := waitLogLine(ctx, p, "floor: ready", 2*time.Minute); err != nil {
		return cp, err
	}
	return cp, waitHTTP(ctx, cp.metricsURL, 30*time.Second, p)
}

// startFloorWebhook installs the executor's webhooks and serves them with
// `executor webhook` (the webhook server alone): the floor's creates then pay
// the admission call the executor's do.
func (s *session) startFloorWebhook(ctx context.Context) error {
	w, err := installWebhooks(s.o, s.r)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() { _ = w.Cleanup() })
	args := append([]string{"webhook", "--kubeconfig=" + s.r.ctrlKC, "--executor.metricsBindAddress=0",
		"--executor.healthProbeBindAddress=0", "--executor.leaderElect=false"}, webhookArgs(w)...)
	p, err := startProc(ctx, "webhook", filepath.Join(s.dir, "webhook.log"), s.o.ExecutorBin, args...)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() { p.Stop(10 * time.Second) })
	s.services = append(s.services, p)
	return waitTCP(ctx, net.JoinHostPort(w.LocalServingHost, strconv.Itoa(w.LocalServingPort)), time.Minute, p)
}

// startExecutorDeps runs the events service and
// the cache service, each a subprocess, and writes the executor's config
// file when the workload needs one: the Flyte form's blob storage, a file://
// bucket in the work directory.
func startExecutorDeps(ctx context.Context, o options, r *rig, dir string) (*executorDeps, error) {
	d := &executorDeps{}
	if o.Webhook {
		w, err := installWebhooks(o, r)
		if err != nil {
			return d, err
		}
		d.webhooks = w
	}
	if o.Workload == workloadFlyte {
		b, err := json.Marshal(map[string]any{config.StorageSection: local.StorageConfig(dir)})
		if err != nil {
			return nil, err
		}
		d.config = filepath.Join(dir, "executor-config.yaml")
		if err := os.WriteFile(d.config, b, 0o644); err != nil {
			return nil, err
		}
	}
	evPort, err := freePort()
	if err != nil {
		return nil, err
	}
	evAddr := "127.0.0.1:" + strconv.Itoa(evPort)
	ev, err := startProc(ctx, "events-service", filepath.Join(dir, "events-service.log"), o.ExecutorBin,
		"events-service", "--listen="+evAddr, "--data-dir="+filepath.Join(dir, "events"))
	if err != nil {
		return nil, err
	}
	d.svcs = append(d.svcs, ev)
	cachePort, err := freePort()
	if err != nil {
		return d, err
	}
	d.cacheAddr = "127.0.0.1:" + strconv.Itoa(cachePort)
	cs, err := startProc(ctx, "cache-service", filepath.Join(dir, "cache-service.log"), o.ExecutorBin,
		"cache-service", "--listen="+d.cacheAddr, "--data-dir="+filepath.Join(dir, "cache"))
	if err != nil {
		return d, err
	}
	d.svcs = append(d.svcs, cs)
	for _, s := range []struct {
		p    *proc
		addr string
	}{{ev, evAddr}, {cs, d.cacheAddr}} {
		if err := waitTCP(ctx, s.addr, time.Minute, s.p); err != nil {
			return d, err
		}
	}
	d.eventsAddr = evAddr
	return d, nil
}

// startExecutor runs bin/executor (log <name>.log) against deps; gcArgs
// configure its garbage collector.
func startExecutor(ctx context.Context, o options, r *rig, dir string, deps *executorDeps, name string, gcArgs []string) (*controllerProc, error) {
	mport, err := freePort()
	if err != nil {
		return nil, err
	}
	maddr := "127.0.0.1:" + strconv.Itoa(mport)
	args := []string{"--kubeconfig=" + r.ctrlKC,
		"--executor.metricsBindAddress=" + maddr, "--executor.metricsSecure=false",
		"--executor.healthProbeBindAddress=0", "--executor.leaderElect=false",
		"--executor.kubeAPIQPS=" + strconv.FormatFloat(o.QPS, 'f', -1, 64), "--executor.kubeAPIBurst=" + strconv.Itoa(o.Burst)}
	args = append(args, deps.args()...)
	if o.Unrelated > 0 {
		args = append(args, "--executor.namespaces="+benchNamespace)
	}
	args = append(args, gcArgs...)
	args = append(args, strings.Fields(o.ExecutorArgs)...)
	p, err := startProc(ctx, name, filepath.Join(dir, name+".log"), o.ExecutorBin, args...)
	if err != nil {
		return nil, err
	}
	cp := &controllerProc{p: p, metricsURL: "http://" + maddr + "/metrics"}
	if err := waitHTTP(ctx, cp.metricsURL, 2*time.Minute, p); err != nil {
		return cp, err
	}
	// The metrics server starts before the caches sync: wait for the
	// reconciler's workers, which start once they have.
	if err := waitLogLine(ctx, p, `"msg":"Starting workers"`, 2*time.Minute); err != nil {
		return cp, err
	}
	time.Sleep(time.Second)
	return cp, nil
}
