// Package setup wires the executor's manager from a Config: servers, caches,
// leader election, controllers.
package setup

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/cache"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/controller"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/gc"
	"github.com/taskaction/executor/pkg/metrics"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/plugin/clustered"
	"github.com/taskaction/executor/pkg/plugin/container"
	"github.com/taskaction/executor/pkg/plugin/dask"
	"github.com/taskaction/executor/pkg/plugin/kubeflow"
	"github.com/taskaction/executor/pkg/plugin/ray"
	"github.com/taskaction/executor/pkg/plugin/sleep"
	"github.com/taskaction/executor/pkg/plugin/spark"
	"github.com/taskaction/executor/pkg/storage"
	"github.com/taskaction/executor/pkg/task"
	"github.com/taskaction/executor/pkg/tasklog"
	"github.com/taskaction/executor/pkg/tracing"
	"github.com/taskaction/executor/pkg/webhook"
)

// LeaderElectionID is the name of the leader-election Lease.
const LeaderElectionID = "abf369a8.flyte.org"

// ManagedLabel marks the pods the executor creates; the pod cache holds only
// those (ownership itself is the controller reference's UID, never the label).
const ManagedLabel = container.LabelManaged

const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Scheme returns a scheme with the core types and the TaskAction API.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(flytev1.AddToScheme(s))
	plugins, err := builtinPlugins(config.Default())
	utilruntime.Must(err)
	for _, p := range plugins {
		if b, ok := p.(plugin.SchemeBuilder); ok {
			utilruntime.Must(b.AddToScheme(s))
		}
	}
	return s
}

// builtinPlugins are the executor's plugins, configured by cfg (an engine
// plugin reads its `plugins: <name>:` section): the container plugin (the
// default, for every task type no other claims) first.
func builtinPlugins(cfg config.Config) ([]plugin.Plugin, error) {
	kf, err := kubeflow.New(cfg)
	if err != nil {
		return nil, err
	}
	sp, err := spark.New(cfg)
	if err != nil {
		return nil, err
	}
	rp, err := ray.New(cfg)
	if err != nil {
		return nil, err
	}
	dk, err := dask.New(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := clustered.New(cfg)
	if err != nil {
		return nil, err
	}
	return append([]plugin.Plugin{container.New(), sleep.New(), sp, dk, rp, cl}, kf...), nil
}

// Options are the parts of the wiring that are not configuration.
type Options struct {
	// Recorder replaces the events-service client (tests); nil means the
	// batching client of cfg.EventsServiceURL.
	Recorder events.Recorder
	// Registry replaces the built-in plugins; nil means the container plugin,
	// also serving every task type no plugin claims.
	Registry *plugin.Registry
	// Cache replaces the cache-service client (tests); nil means the client
	// of cfg.CacheServiceURL.
	Cache cache.Client
	// Namespaces, if set, replaces cfg.Namespaces (tests, each in its own
	// namespace, with a shared configuration).
	Namespaces []string
	// SkipNameValidation lets tests start several managers in one process.
	SkipNameValidation bool
	// Webhook holds the webhooks' hooks (an extra TaskAction validator).
	Webhook webhook.Options
	// TracerProvider replaces the one made from cfg.Otel (tests, `executor
	// local`, whose services share it); its owner shuts it down.
	TracerProvider trace.TracerProvider
}

// Registry returns the built-in plugins configured by cfg: the container
// plugin, which also serves every task type no other plugin claims, the
// sleep plugin and the engine plugins. A plugin's section that is not valid
// is an error here, before anything starts.
func Registry(cfg config.Config) (*plugin.Registry, error) {
	reg := plugin.NewRegistry()
	plugins, err := builtinPlugins(cfg)
	if err != nil {
		return nil, err
	}
	for _, p := range plugins {
		if err := reg.Register(p); err != nil {
			return nil, err
		}
	}
	reg.SetDefault(plugins[0])
	return reg, nil
}

// clientConfig is restCfg with the executor's client settings of cfg: its
// limits and whether the API server gzips what it sends.
func clientConfig(restCfg *rest.Config, cfg config.Config) *rest.Config {
	c := rest.CopyConfig(restCfg)
	c.QPS = cfg.KubeAPIQPS
	c.Burst = cfg.KubeAPIBurst
	c.DisableCompression = !cfg.KubeAPICompression
	return c
}

// Setup builds the manager from cfg and restCfg. It does not start it.
func Setup(cfg config.Config, restCfg *rest.Config, opts Options) (_ manager.Manager, err error) {
	// Traces as cfg.Otel says, unless the caller brings its provider; ours
	// is flushed and closed when the manager stops (or Setup fails).
	var exp *tracing.Exporter
	if opts.TracerProvider == nil {
		if exp, err = tracing.Open(context.Background(), cfg.Otel); err != nil {
			return nil, fmt.Errorf("tracing: %w", err)
		}
		defer func() {
			if err != nil {
				_ = exp.Shutdown(context.Background())
			}
		}()
		opts.TracerProvider = exp.Provider(tracing.ServiceExecutor)
	}
	restCfg = clientConfig(restCfg, cfg)
	metrics.InstrumentRESTConfig(restCfg)
	tracing.InstrumentRESTConfig(restCfg, opts.TracerProvider)

	tlsOpts := []func(*tls.Config){}
	if !cfg.EnableHTTP2 {
		// HTTP/2 stays off unless asked for: its rapid-reset and stream
		// exhaustion attacks are not worth the gain for metrics and webhooks.
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}

	metricsOpts := metricsserver.Options{
		BindAddress:   cfg.MetricsBindAddress,
		SecureServing: cfg.MetricsSecure,
		TLSOpts:       tlsOpts,
	}
	if cfg.MetricsSecure {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if cfg.MetricsCertPath != "" {
		metricsOpts.CertDir = cfg.MetricsCertPath
		metricsOpts.CertName = cfg.MetricsCertName
		metricsOpts.KeyName = cfg.MetricsCertKey
	}

	webhookServer := webhook.NewServer(cfg, tlsOpts)

	namespaces := cfg.Namespaces
	if len(opts.Namespaces) > 0 {
		namespaces = opts.Namespaces
	}

	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        Scheme(),
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        cfg.HealthProbeBindAddress,
		PprofBindAddress:              cfg.PprofBindAddress,
		LeaderElection:                cfg.LeaderElect,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       leaderElectionNamespace(cfg),
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhookServer,
		Cache:                         CacheOptions(namespaces...),
		Controller:                    crconfig.Controller{SkipNameValidation: &opts.SkipNameValidation},
	})
	if err != nil {
		return nil, fmt.Errorf("create controller manager: %w", err)
	}
	if exp.Enabled() {
		if err := mgr.Add(exp.ShutdownOnStop(mgr.GetLogger().WithName("tracing"))); err != nil {
			return nil, fmt.Errorf("add the tracing shutdown: %w", err)
		}
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr)); err != nil {
		return nil, fmt.Errorf("add ready check: %w", err)
	}
	// Admission webhooks (pkg/webhook): registered only when enabled;
	// standalone serves them and nothing else.
	settings, err := PluginSettings(cfg)
	if err != nil {
		return nil, err
	}
	if opts.Webhook.ValidateTaskAction == nil {
		reg := opts.Registry
		if reg == nil {
			if reg, err = Registry(cfg); err != nil {
				return nil, fmt.Errorf("plugin registry: %w", err)
			}
		}
		opts.Webhook.ValidateTaskAction = TaskActionValidator(settings, reg)
	}
	if err := webhook.Register(mgr, webhookServer, cfg, opts.Webhook); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	if cfg.Webhook.Standalone {
		return mgr, nil
	}
	if err := metrics.RegisterPhaseGauge(mgr.GetCache()); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	if err := gc.Add(mgr, cfg.GC); err != nil {
		return nil, fmt.Errorf("garbage collector: %w", err)
	}
	if err := addReconciler(mgr, cfg, opts, settings); err != nil {
		return nil, err
	}
	return mgr, nil
}

func addReconciler(mgr manager.Manager, cfg config.Config, opts Options, settings plugin.Settings) error {
	reg := opts.Registry
	if reg == nil {
		var err error
		if reg, err = Registry(cfg); err != nil {
			return fmt.Errorf("plugin registry: %w", err)
		}
		// Flyte's charts name plugins this executor does not have: those task
		// types keep the default plugin, with a warning rather than a refusal.
		if unknown := reg.MapTaskTypes(cfg.TaskPlugins); len(unknown) > 0 {
			mgr.GetLogger().Info("tasks.task-plugins.default-for-task-types names plugins that do not exist here; those task types use the default plugin", "entries", unknown)
		}
	}
	rec := opts.Recorder
	if rec == nil {
		b := events.NewBatcher(events.NewClient(cfg.EventsServiceURL, events.DefaultHTTPClient(), tracing.ClientOptions(opts.TracerProvider)...),
			events.BatcherOptions{Saturated: controller.UnderPressure, TracerProvider: opts.TracerProvider})
		if err := mgr.Add(b); err != nil {
			return fmt.Errorf("add events batcher: %w", err)
		}
		if err := registerReplacing(b); err != nil {
			return fmt.Errorf("register events batcher metrics: %w", err)
		}
		rec = b
	}
	cc := opts.Cache
	if cc == nil {
		cc = cache.NewClient(cfg.CacheServiceURL, cache.DefaultHTTPClient(), cache.WithTracerProvider(opts.TracerProvider))
	}
	store, err := storage.New(cfg.Storage)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	store.TraceWith(opts.TracerProvider)
	logs, err := tasklog.New(cfg.TaskLogs)
	if err != nil {
		return fmt.Errorf("task logs: %w", err)
	}
	pods, err := controller.NewPodCreator(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	r := &controller.Reconciler{
		Pods:       pods,
		Cache:      cc,
		Storage:    store,
		TaskLogs:   logs,
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Registry:   reg,
		Recorder:   rec,
		KubeEvents: mgr.GetEventRecorder("taskaction-controller"),
		Tracer:     tracing.NewTracer(opts.TracerProvider, "executor/controller"),
		Options: controller.Options{
			Cluster:              cfg.Cluster,
			MaxSystemFailures:    int32(cfg.MaxSystemFailures),
			RequeueDuration:      cfg.RequeueDuration.Duration,
			QueuedStatusDelay:    cfg.QueuedStatusDelay.Duration,
			SaturatedStatusDelay: cfg.SaturatedStatusDelay.Duration,
			ExecutingStatusDelay: cfg.ExecutingStatusDelay.Duration,
			Settings:             settings,
		},
	}
	if err := r.SetupWithManager(mgr, cfg.MaxConcurrentReconciles); err != nil {
		return fmt.Errorf("set up the TaskAction controller: %w", err)
	}
	return nil
}

// TaskActionValidator is the admission check of a TaskAction that the
// reconciler would otherwise make at launch: its template decodes (either
// form) and, for the pod plugin, the pod it becomes is buildable and meets
// the pod-security policy. The same functions decide at launch, so the two
// never disagree.
func TaskActionValidator(settings plugin.Settings, reg *plugin.Registry) func(*flytev1.TaskAction) error {
	return func(ta *flytev1.TaskAction) error {
		if ta.Spec.ActionType == flytev1.ActionTypeCondition {
			return nil
		}
		t, err := task.FromTaskAction(ta)
		if err != nil {
			return err
		}
		var p plugin.Plugin = container.New()
		if reg != nil {
			typ := ta.Spec.TaskType
			if t.Type != "" {
				typ = t.Type
			}
			if p, err = reg.Resolve(typ); err != nil {
				return nil // the reconciler reports it (PluginNotFound)
			}
		}
		v, ok := p.(plugin.Validator)
		if !ok {
			return nil
		}
		if err := v.Validate(plugin.TaskContext{TaskAction: ta, Task: t, Attempt: 1, Settings: settings}); err != nil {
			var le *plugin.LaunchError
			if errors.As(err, &le) {
				return errors.New(le.Err.Message)
			}
			return err
		}
		return nil
	}
}

// PluginSettings are the executor-wide values plugins need, from cfg.
func PluginSettings(cfg config.Config) (plugin.Settings, error) {
	policy, err := cfg.PodSecurity.Policy()
	if err != nil {
		return plugin.Settings{}, fmt.Errorf("pod security policy: %w", err)
	}
	logs, err := tasklog.New(cfg.TaskLogs)
	if err != nil {
		return plugin.Settings{}, fmt.Errorf("task logs: %w", err)
	}
	k := cfg.K8sPlugin
	return plugin.Settings{
		PodSecurity:                policy,
		TaskLogs:                   logs,
		DefaultServiceAccount:      cfg.DefaultK8sServiceAccount,
		DefaultCPU:                 cfg.DefaultCPU,
		DefaultMemory:              cfg.DefaultMemory,
		ImagePullGracePeriod:       cfg.ImagePullGracePeriod.Duration,
		CreateContainerGracePeriod: cfg.CreateContainerGracePeriod.Duration,

		DefaultEnvVars:                          k.DefaultEnvVars,
		DefaultLabels:                           k.DefaultLabels,
		DefaultAnnotations:                      k.DefaultAnnotations,
		DefaultNodeSelector:                     k.DefaultNodeSelector,
		DefaultTolerations:                      k.DefaultTolerations,
		InterruptibleTolerations:                k.InterruptibleTolerations,
		InterruptibleNodeSelector:               k.InterruptibleNodeSelector,
		InterruptibleNodeSelectorRequirement:    k.InterruptibleNodeSelectorRequirement,
		NonInterruptibleNodeSelectorRequirement: k.NonInterruptibleNodeSelectorRequirement,
		GPUResourceName:                         k.GPUResourceName,
	}, nil
}

// registerReplacing registers c, replacing the collector of an earlier manager
// in the same process (tests, `executor local` restarts).
func registerReplacing(c prometheus.Collector) error {
	err := crmetrics.Registry.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		crmetrics.Registry.Unregister(are.ExistingCollector)
		err = crmetrics.Registry.Register(c)
	}
	return err
}

// CacheOptions scope the informer cache: only the pods the executor manages,
// and only the given namespaces (all when none).
func CacheOptions(namespaces ...string) crcache.Options {
	o := crcache.Options{
		// managedFields are a third of a typical object and nothing here reads them.
		DefaultTransform: crcache.TransformStripManagedFields(),
		ByObject:         map[client.Object]crcache.ByObject{},
	}
	// Every plugin's objects carry the managed label: the cache holds only
	// those. Pods keep only what the executor reads of their spec.
	managed := labels.SelectorFromSet(labels.Set{ManagedLabel: "true"})
	plugins, err := builtinPlugins(config.Default())
	utilruntime.Must(err) // the defaults configure every plugin
	for _, p := range plugins {
		if _, ok := p.(plugin.Requirer); ok {
			// An engine's kind may not be served: the cache maps every
			// ByObject type when it is made, and would stop the executor.
			// Its objects are cached unscoped once a task needs them.
			continue
		}
		for _, obj := range p.WatchedTypes() {
			bo := crcache.ByObject{Label: managed}
			if _, ok := obj.(*corev1.Pod); ok {
				bo.Transform = container.TrimPod
			}
			o.ByObject[obj] = bo
		}
	}
	if len(namespaces) > 0 {
		o.DefaultNamespaces = map[string]crcache.Config{}
		for _, ns := range namespaces {
			o.DefaultNamespaces[ns] = crcache.Config{}
		}
	}
	return o
}

// cacheSynced reports ready once the informer cache has synced, so that a new
// replica takes no traffic before it can see its objects.
func cacheSynced(mgr manager.Manager) healthz.Checker {
	return func(req *http.Request) error {
		// Not 0: with an already-expired context WaitForCacheSync picks at random
		// between "started" and "done" and fails half the time even when synced.
		// Below the kubelet's default 1s probe timeout.
		ctx, cancel := context.WithTimeout(req.Context(), 500*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("informer cache not synced")
		}
		return nil
	}
}

func leaderElectionNamespace(cfg config.Config) string {
	if cfg.LeaderElectionNamespace != "" {
		return cfg.LeaderElectionNamespace
	}
	if _, err := os.Stat(inClusterNamespaceFile); err == nil {
		return "" // controller-runtime reads the pod's own namespace
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "default"
}
