// Package local runs the whole executor on one machine: a control plane
// (etcd and kube-apiserver from bin/k8s), the services the executor talks
// to, the executor, and a node that runs pods as local processes.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskaction/executor/pkg/cachesvc"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/eventsvc"
	"github.com/taskaction/executor/pkg/setup"
	"github.com/taskaction/executor/pkg/tracing"
)

// DefaultDataDir is where state lives unless told otherwise.
const DefaultDataDir = "data/local"

// ReadyLine is printed once everything is up; scripts and tests wait for it.
const ReadyLine = "executor local: ready"

// Service is a component run beside the executor, in this process.
type Service struct {
	// Name is used in messages ("events service").
	Name string
	// Addr is its listen address; it is checked to be free before anything starts.
	Addr string
	// Run serves until ctx ends.
	Run func(ctx context.Context) error
	// TLS: the server speaks TLS, so readiness is a completed handshake (a bare
	// connection closed unread makes the server log a handshake error).
	TLS bool
}

// Options configure Run.
type Options struct {
	// Root is the repository root (bin/k8s, config/); default: found upwards from the working directory.
	Root string
	// DataDir holds the kubeconfig, the services' SQLite files and the pods' logs; default DefaultDataDir.
	DataDir string
	// Config is the executor's configuration. Listen addresses without a host
	// are bound to 127.0.0.1, and leader election is off (one replica).
	Config config.Config
	// Demo applies the samples and returns once they reached their expected end.
	Demo bool
	// SamplesDir holds the demo's TaskActions; default <Root>/config/samples.
	SamplesDir string
	// DemoTimeout bounds the demo; default 3m.
	DemoTimeout time.Duration
	// Services are run besides the built-in ones (see builtinServices).
	Services []Service
	// MaxPods bounds the pods running at once on the local node.
	MaxPods int
	// Setup is passed to setup.Setup.
	Setup setup.Options
	// Out receives the human-readable output; default os.Stdout.
	Out io.Writer
	Log logr.Logger

	traces *tracing.Exporter // the otel section's, shared by the executor and the services
}

// Run brings everything up, prints ReadyLine and serves until ctx ends (or,
// with Demo, until the demo is over), then stops everything it started.
func Run(ctx context.Context, o Options) (err error) {
	if err := o.defaults(); err != nil {
		return err
	}
	cfg := &o.Config
	cfg.LeaderElect = false
	// The admission webhooks run too, as deployed: the control plane calls
	// them (see startControlPlane).
	cfg.Webhook.Enabled = true
	cfg.MetricsBindAddress = loopback(cfg.MetricsBindAddress)
	cfg.HealthProbeBindAddress = loopback(cfg.HealthProbeBindAddress)
	if !StorageConfigured(cfg.Storage) {
		// Tasks and the executor share the file:// bucket under the data directory.
		cfg.Storage = StorageConfig(o.DataDir)
	}

	if o.Setup.TracerProvider == nil {
		// One exporter (one file) for the executor and the services of this
		// process, flushed once everything has stopped.
		if o.traces, err = tracing.Open(ctx, cfg.Otel); err != nil {
			return fmt.Errorf("tracing: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = o.traces.Shutdown(sctx)
		}()
		o.Setup.TracerProvider = o.traces.Provider(tracing.ServiceExecutor)
	}
	services, err := builtinServices(o)
	if err != nil {
		return err
	}
	services = append(services, o.Services...)

	// Every check that can fail fast does, before a control plane is started.
	assets, err := checkBinaries(o.Root)
	if err != nil {
		return err
	}
	if err := checkWritable(o.DataDir); err != nil {
		return err
	}
	var samples []*sample
	if o.Demo {
		if samples, err = LoadSamples(o.SamplesDir); err != nil {
			return err
		}
		for _, s := range samples {
			RebaseSample(s.ta, BucketURI(o.DataDir))
		}
	}
	ports := append([]Service{{Name: "executor metrics", Addr: cfg.MetricsBindAddress, TLS: cfg.MetricsSecure}, {Name: "executor probes", Addr: cfg.HealthProbeBindAddress}}, services...)
	if err := checkPorts(ports); err != nil {
		return err
	}

	cp, err := startControlPlane(o, assets)
	if err != nil {
		return err
	}
	defer func() {
		if serr := cp.env.Stop(); serr != nil && err == nil {
			err = fmt.Errorf("stop the control plane: %w", serr)
		}
		_ = cp.logs.Close()
	}()

	if cfg.Webhook.Active() {
		// envtest installed config/webhook's configurations pointing at this
		// port, with a serving certificate and CA of its own.
		w := cp.env.WebhookInstallOptions
		cfg.Webhook.Host, cfg.WebhookPort = w.LocalServingHost, w.LocalServingPort
		cfg.WebhookCertPath, cfg.WebhookCertName, cfg.WebhookCertKey = w.LocalServingCertDir, "tls.crt", "tls.key"
		ports = append(ports, Service{Name: "executor webhooks", Addr: net.JoinHostPort(w.LocalServingHost, strconv.Itoa(w.LocalServingPort)), TLS: true})
	}

	kubeconfig := filepath.Join(o.DataDir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, cp.kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := newGroup()
	node := &Node{Config: cp.admin, DataDir: o.DataDir, MaxPods: o.MaxPods, Log: o.Log.WithName("node")}
	g.Go("local node", func() error { return node.Start(runCtx) })
	for _, s := range services {
		g.Go(s.Name, func() error { return s.Run(runCtx) })
	}
	mgr, err := setup.Setup(*cfg, cp.executor, o.Setup)
	if err != nil {
		cancel()
		g.Wait(time.Minute)
		return err
	}
	g.Go("executor", func() error { return mgr.Start(runCtx) })

	// Ready means: the node took its place, the services accept connections
	// and the executor's caches synced.
	readyCtx, readyCancel := context.WithTimeout(runCtx, 2*time.Minute)
	readyErr := func() error {
		select {
		case <-node.Ready():
		case <-readyCtx.Done():
			return errors.New("the local node did not become ready")
		case err := <-g.errc:
			return err
		}
		// The executor's own servers too: a ready line before its metrics
		// listen would send a user's first scrape to a refused connection.
		for _, s := range ports {
			if err := waitListening(readyCtx, s); err != nil {
				return err
			}
		}
		if !mgr.GetCache().WaitForCacheSync(readyCtx) {
			return errors.New("the executor's caches did not sync")
		}
		return nil
	}()
	readyCancel()
	if readyErr != nil {
		cancel()
		if werr := g.Wait(time.Minute); werr != nil {
			readyErr = errors.Join(readyErr, werr)
		}
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("executor local did not start: %w", readyErr)
	}
	o.printReady(cp, kubeconfig, services, node)

	var result error
	if o.Demo {
		c, cerr := client.New(cp.admin, client.Options{Scheme: setup.Scheme()})
		if cerr != nil {
			result = cerr
		} else {
			result = runDemo(runCtx, c, o, node, samples, g.errc)
		}
	} else {
		select {
		case <-ctx.Done():
		case result = <-g.errc:
			result = fmt.Errorf("stopped unexpectedly: %w", result)
		}
	}
	_, _ = fmt.Fprintln(o.Out, "executor local: stopping")
	cancel()
	if werr := g.Wait(time.Minute); werr != nil && result == nil {
		result = werr
	}
	return result
}

func (o *Options) defaults() error {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.DemoTimeout <= 0 {
		o.DemoTimeout = 3 * time.Minute
	}
	if o.DataDir == "" {
		o.DataDir = DefaultDataDir
	}
	abs, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	o.DataDir = abs
	if o.Root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		o.Root = r
	}
	if o.SamplesDir == "" {
		o.SamplesDir = filepath.Join(o.Root, "config", "samples")
	}
	return nil
}

// builtinServices are the services the executor talks to, each run in this
// process on its SQLite file in o.DataDir when its URL in the configuration
// points at this machine (else the executor uses the one at that URL).
func builtinServices(o Options) ([]Service, error) {
	var out []Service
	addr, local, err := localAddr(o.Config.EventsServiceURL)
	if err != nil {
		return nil, fmt.Errorf("eventsServiceURL: %w", err)
	}
	if local {
		log := o.Log.WithName("events-service")
		out = append(out, Service{Name: "events service", Addr: addr, Run: func(ctx context.Context) error {
			store, err := eventsvc.OpenSQLite(ctx, o.DataDir)
			if err != nil {
				return err
			}
			defer func() { _ = store.Close() }()
			return eventsvc.NewServer(store, eventsvc.ServerOptions{Listen: addr, Log: log,
				TracerProvider: o.traces.Provider(tracing.ServiceEvents)}).Run(ctx)
		}})
	}
	cacheAddr, local, err := localAddr(o.Config.CacheServiceURL)
	if err != nil {
		return nil, fmt.Errorf("cacheServiceURL: %w", err)
	}
	if local {
		log := o.Log.WithName("cache-service")
		out = append(out, Service{Name: "cache service", Addr: cacheAddr, Run: func(ctx context.Context) error {
			store, err := cachesvc.OpenSQLite(ctx, o.DataDir)
			if err != nil {
				return err
			}
			defer func() { _ = store.Close() }()
			return cachesvc.NewServer(store, cachesvc.ServerOptions{Listen: cacheAddr, Log: log,
				TracerProvider: o.traces.Provider(tracing.ServiceCache)}).Run(ctx)
		}})
	}
	return out, nil
}

func (o Options) printReady(cp *controlPlane, kubeconfig string, services []Service, node *Node) {
	w := o.Out
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(w, format+"\n", a...) }
	p("executor local: control plane at %s (log: %s)", cp.admin.Host, cp.logs.Name())
	p("  export KUBECONFIG=%s", kubeconfig)
	if len(cp.rbac) > 0 {
		p("  executor runs as user %q bound to ClusterRoles %s", "executor", strings.Join(cp.rbac, ", "))
	} else {
		p("  no ClusterRoles in config/rbac: the executor runs as admin")
	}
	for _, s := range services {
		p("  %s: %s", s.Name, s.Addr)
	}
	if a := o.Config.MetricsBindAddress; a != "0" && a != "" {
		scheme := "http"
		if o.Config.MetricsSecure {
			scheme = "https"
		}
		p("  executor metrics: %s://%s/metrics", scheme, a)
		if o.Config.MetricsSecure && cp.scraper {
			p("    curl -k -H \"Authorization: Bearer $(kubectl create token %s)\" %s://%s/metrics", scraperSA, scheme, a)
		}
	}
	if a := o.Config.HealthProbeBindAddress; a != "0" && a != "" {
		p("  executor probes: http://%s/healthz and /readyz", a)
	}
	p("  pods run on node %q as local processes (images are not used); logs: kubectl logs <pod>, or %s",
		node.Name, filepath.Join(o.DataDir, "pods", "<namespace>_<pod>", "<container>.log"))
	p("  data: %s", o.DataDir)
	p("%s (Ctrl-C stops everything)", ReadyLine)
}
