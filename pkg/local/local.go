// Package local runs the whole executor on one machine: a control plane
// (etcd and kube-apiserver from bin/k8s), the services the executor talks
// to, the executor, and a node that runs pods as local processes.
package local

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

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

// localAddr is the loopback listen address of a service URL, and whether
// the URL is on this machine at all.
func localAddr(raw string) (string, bool, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, err
	}
	host, port := u.Hostname(), u.Port()
	if host != "localhost" && host != loopbackIP && host != "::1" {
		return "", false, nil
	}
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(loopbackIP, port), true, nil
}

// loopback binds an address without a host to 127.0.0.1; "0" (disabled) stays.
func loopback(addr string) string {
	if addr == "" || addr == "0" {
		return addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr
	}
	return net.JoinHostPort(loopbackIP, port)
}

func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 64 {
		if _, err := os.Stat(filepath.Join(dir, "config", "crd", "bases")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", errors.New("executor local runs from the executor's repository (it needs bin/k8s and config/): no go.mod with config/crd/bases found here or above")
}

func checkBinaries(root string) (string, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		st, err := os.Stat(filepath.Join(assets, b))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s not found in %s: run `make envtest`", b, assets)
		}
	}
	return assets, nil
}

func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("data directory %s cannot be created: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("data directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// checkPorts says which port is taken, rather than letting one component
// fail halfway through the start.
func checkPorts(ss []Service) error {
	for _, s := range ss {
		if s.Addr == "" || s.Addr == "0" {
			continue
		}
		_, port, _ := net.SplitHostPort(s.Addr)
		if port == "0" {
			continue
		}
		ln, err := net.Listen("tcp", s.Addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("port %s (%s) is already in use", port, s.Name)
		}
		if err != nil {
			return fmt.Errorf("cannot listen on %s (%s): %w", s.Addr, s.Name, err)
		}
		_ = ln.Close()
	}
	return nil
}

func waitListening(ctx context.Context, s Service) error {
	if _, port, err := net.SplitHostPort(s.Addr); err != nil || port == "0" {
		return nil // disabled, or a port only the server knows
	}
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", s.Addr)
		if err == nil && s.TLS {
			// Only liveness is checked here; nothing is sent over the connection.
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec
			err = tc.HandshakeContext(ctx)
			c = tc
		}
		if err == nil {
			_ = c.Close()
			return nil
		}
		if c != nil {
			_ = c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s is not listening on %s: %w", s.Name, s.Addr, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type controlPlane struct {
	env        *envtest.Environment
	admin      *rest.Config // system:masters: the node, the demo, the printed kubeconfig
	executor   *rest.Config // bound to the project's ClusterRoles
	kubeconfig []byte
	logs       *os.File
	rbac       []string
	scraper    bool // the metrics-scraper ServiceAccount exists
}

// metricsReaderRole is the ClusterRole a metrics scraper needs (config/rbac).
const metricsReaderRole = "metrics-reader"

// scraperSA is a ServiceAccount allowed to read the executor's metrics, so
// that `kubectl create token` gives a bearer token the metrics server accepts.
const scraperSA = "metrics-scraper"

func addScraper(cfg *rest.Config) error {
	c, err := client.New(cfg, client.Options{Scheme: setup.Scheme()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: scraperSA, Namespace: "default"}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ServiceAccount %s: %w", scraperSA, err)
	}
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "executor-local-" + scraperSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scraperSA, Namespace: "default"}},
	}
	if err := c.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind ServiceAccount %s: %w", scraperSA, err)
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// startControlPlane starts etcd and kube-apiserver (their state in temporary
// directories envtest removes on Stop), installs the CRDs and the RBAC, and
// makes the identities.
func startControlPlane(o Options, assets string) (_ *controlPlane, err error) {
	logs, err := os.OpenFile(filepath.Join(o.DataDir, "control-plane.log"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, fmt.Errorf("data directory %s is not writable: %w", o.DataDir, err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        []string{filepath.Join(o.Root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	if o.Config.Webhook.Active() {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths:            []string{filepath.Join(o.Root, "config", "webhook", "manifests.yaml")},
			LocalServingHost: loopbackIP,
		}
	}
	api := env.ControlPlane.GetAPIServer()
	api.Out, api.Err = logs, logs
	if env.ControlPlane.Etcd == nil {
		env.ControlPlane.Etcd = &envtest.Etcd{}
	}
	env.ControlPlane.Etcd.Out, env.ControlPlane.Etcd.Err = logs, logs
	cp := &controlPlane{env: env, logs: logs}
	if _, err := env.Start(); err != nil {
		_ = env.Stop()
		_ = logs.Close()
		return nil, fmt.Errorf("start the control plane (log: %s): %w", logs.Name(), err)
	}
	defer func() {
		if err != nil {
			_ = env.Stop()
			_ = logs.Close()
		}
	}()
	admin, err := env.AddUser(envtest.User{Name: "local-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("control plane: admin user: %w", err)
	}
	cp.admin = admin.Config()
	if cp.kubeconfig, err = admin.KubeConfig(); err != nil {
		return nil, fmt.Errorf("control plane: kubeconfig: %w", err)
	}
	const executorUser = "executor"
	roles, err := installRBAC(cp.admin, filepath.Join(o.Root, "config", "rbac"), executorUser)
	if err != nil {
		return nil, err
	}
	cp.rbac = roles
	if contains(roles, metricsReaderRole) {
		if err := addScraper(cp.admin); err != nil {
			return nil, err
		}
		cp.scraper = true
	}
	if len(roles) == 0 {
		// Nothing to bind: run as admin rather than with no rights at all.
		cp.executor = cp.admin
		return cp, nil
	}
	u, err := env.AddUser(envtest.User{Name: executorUser}, nil)
	if err != nil {
		return nil, fmt.Errorf("control plane: executor user: %w", err)
	}
	cp.executor = u.Config()
	return cp, nil
}

// installRBAC creates the ClusterRoles of config/rbac and binds each to user,
// so that the executor runs with the rights it is deployed with.
func installRBAC(cfg *rest.Config, dir, user string) ([]string, error) {
	c, err := client.New(cfg, client.Options{Scheme: setup.Scheme()})
	if err != nil {
		return nil, err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var names []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096)
		for {
			var role rbacv1.ClusterRole
			if err := dec.Decode(&role); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if role.Kind != "ClusterRole" || role.Name == "" || role.AggregationRule != nil {
				continue
			}
			role.ResourceVersion = ""
			if err := c.Create(ctx, &role); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("install ClusterRole %s from %s: %w", role.Name, f, err)
			}
			binding := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "executor-local-" + role.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			}
			if err := c.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("bind ClusterRole %s: %w", role.Name, err)
			}
			names = append(names, role.Name)
		}
	}
	return names, nil
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

// errStopped is a component's clean return.
var errStopped = errors.New("stopped")

// group runs goroutines and reports the first that ends.
type group struct {
	errc chan error
	done chan struct{}
	n    int
}

func newGroup() *group { return &group{errc: make(chan error, 16), done: make(chan struct{}, 16)} }

// Go runs f; its end is an error on errc (a nil return counts: nothing should
// stop before it is told to).
func (g *group) Go(name string, f func() error) {
	g.n++
	go func() {
		defer func() { g.done <- struct{}{} }()
		err := f()
		if err == nil {
			err = errStopped
		}
		select {
		case g.errc <- fmt.Errorf("%s: %w", name, err):
		default:
		}
	}()
}

// Wait waits up to d for every goroutine, after their context was cancelled,
// and returns the errors other than a clean stop.
func (g *group) Wait(d time.Duration) error {
	timeout := time.After(d)
	for ; g.n > 0; g.n-- {
		select {
		case <-g.done:
		case <-timeout:
			return fmt.Errorf("%d components did not stop within %s", g.n, d)
		}
	}
	var errs []error
	for {
		select {
		case err := <-g.errc:
			if !errors.Is(err, errStopped) && !errors.Is(err, context.Canceled) {
				errs = append(errs, err)
			}
		default:
			return errors.Join(errs...)
		}
	}
}
