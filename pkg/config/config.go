// Package config holds the executor's configuration: its types, defaults,
// loading from a YAML file and flags, and validation.
package config

import (
	"encoding/json"
	"fmt"
	"time"
)

// Section is the top-level YAML key under which the executor's configuration lives.
const Section = "executor"

// Duration is a time.Duration written in Go syntax ("90s", "30m") in YAML and JSON.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration in Go syntax.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration as Flyte's config.Duration does: a string in
// Go syntax ("" is zero) or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" { // like encoding/json: an empty YAML value keeps what was there
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case float64:
		d.Duration = time.Duration(v)
		return nil
	case string:
		if v == "" {
			d.Duration = 0
			return nil
		}
		p, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("invalid duration %q: use Go syntax such as \"90s\" or \"30m\"", v)
		}
		d.Duration = p
		return nil
	}
	return fmt.Errorf("a duration must be a string such as \"90s\" or \"30m\" (or a number of nanoseconds)")
}

// GCConfig configures the garbage collector of terminal TaskActions.
type GCConfig struct {
	// Interval between sweeps; 0 disables the garbage collector.
	Interval Duration `json:"interval"`
	// MaxTTL is how long a terminal TaskAction is kept after it became terminal.
	MaxTTL Duration `json:"maxTTL"`
}

// Config is the `executor` section.
type Config struct {
	MetricsBindAddress     string `json:"metricsBindAddress"`
	HealthProbeBindAddress string `json:"healthProbeBindAddress"`
	// PprofBindAddress serves Go's /debug/pprof profiles (off by default).
	PprofBindAddress        string `json:"pprofBindAddress"`
	LeaderElect             bool   `json:"leaderElect"`
	LeaderElectionNamespace string `json:"leaderElectionNamespace"`
	MetricsSecure           bool   `json:"metricsSecure"`
	MetricsCertPath         string `json:"metricsCertPath"`
	MetricsCertName         string `json:"metricsCertName"`
	MetricsCertKey          string `json:"metricsCertKey"`
	WebhookPort             int    `json:"webhookPort"`
	WebhookCertPath         string `json:"webhookCertPath"`
	WebhookCertName         string `json:"webhookCertName"`
	WebhookCertKey          string `json:"webhookCertKey"`
	EnableHTTP2             bool   `json:"enableHTTP2"`

	EventsServiceURL string `json:"eventsServiceURL"`
	CacheServiceURL  string `json:"cacheServiceURL"`
	Cluster          string `json:"cluster"`

	// Namespaces limits the executor's cache, hence the TaskActions it runs
	// and collects, to these namespaces; empty: every namespace.
	Namespaces []string `json:"namespaces"`

	DefaultK8sServiceAccount   string   `json:"defaultK8sServiceAccount"`
	DefaultCPU                 string   `json:"defaultCPU"`
	DefaultMemory              string   `json:"defaultMemory"`
	ImagePullGracePeriod       Duration `json:"imagePullGracePeriod"`
	CreateContainerGracePeriod Duration `json:"createContainerGracePeriod"`
	// QueuedStatusDelay holds back the Queued status of a new pod until this
	// long after its creation, so that a pod that starts within it costs no
	// status write for Queued (its events are reported at once). 0 writes
	// each state at once (and turns the two holds below off).
	QueuedStatusDelay Duration `json:"queuedStatusDelay"`
	// SaturatedStatusDelay extends the Queued hold while the executor or the
	// API server is short of capacity, so that writes go to launches and
	// completions. It never shortens it.
	SaturatedStatusDelay Duration `json:"saturatedStatusDelay"`
	// ExecutingStatusDelay: while the executor or the API server is short
	// of capacity, a started pod's Executing status may be held back this
	// long after its start (a task that ends within it costs no write for
	// it); otherwise Executing is written at once, since Flyte's control
	// plane shows an action as running only from the TaskAction's conditions.
	ExecutingStatusDelay Duration `json:"executingStatusDelay"`

	MaxSystemFailures       int      `json:"maxSystemFailures"`
	MaxConcurrentReconciles int      `json:"maxConcurrentReconciles"`
	RequeueDuration         Duration `json:"requeueDuration"`
	KubeAPIQPS              float32  `json:"kubeAPIQPS"`
	KubeAPIBurst            int      `json:"kubeAPIBurst"`
	// KubeAPICompression asks the API server to gzip its answers, watch
	// streams included. Off by default: the executor runs beside the API
	// server, where the bytes are cheap and the API server's CPU is not
	// (gzip of the watch streams was 3% of its CPU on the bench rig, and
	// reading them 4% of the executor's).
	KubeAPICompression bool `json:"kubeAPICompression"`

	GC GCConfig `json:"gc"`

	Webhook WebhookConfig `json:"webhook"` // see webhook.go

	PodSecurity PodSecurityConfig `json:"podSecurity"`

	// Storage and TaskLogs are read from Flyte's own sections of the same file
	// (top-level `storage:` and `plugins: logs:`), not from `executor:`.
	Storage  StorageConfig `json:"-"`
	TaskLogs TaskLogConfig `json:"-"`
	// K8sPlugin (`plugins: k8s:`) and TaskPlugins (`tasks: task-plugins:
	// default-for-task-types:`) are Flyte's pod defaults and task type → plugin map.
	K8sPlugin K8sPluginConfig `json:"-"`
	// PluginSections are the other sections under `plugins:` (an engine
	// plugin's own: plugins.ray, plugins.spark, ...), as the files hold them,
	// keyed by their lower-case names; PluginSection decodes one.
	PluginSections map[string]any    `json:"-"`
	TaskPlugins    map[string]string `json:"-"`
	// Otel is Flyte's top-level `otel:` section: where traces go (otel.go).
	Otel OtelConfig `json:"-"`
}

// PodSecurityConfig limits what the pods the executor creates for TaskActions
// may do (see pkg/podsecurity): whoever may create a TaskAction may otherwise
// have the executor create any pod its own service account may create.
type PodSecurityConfig struct {
	// Level is a Pod Security Standards level: baseline, restricted or privileged.
	Level string `json:"level"`
	// AllowedServiceAccounts lists, per namespace, the service accounts task
	// pods may run as; "*" as a namespace covers namespaces not listed, "*" as
	// an account allows any. Empty: any service account in any namespace.
	AllowedServiceAccounts ServiceAccounts `json:"allowedServiceAccounts"`
}

// Default returns the configuration used when nothing else is given.
func Default() Config {
	return Config{
		MetricsBindAddress:     ":10254",
		HealthProbeBindAddress: ":8081",
		PprofBindAddress:       "0",
		LeaderElect:            false,
		MetricsSecure:          true,
		MetricsCertName:        "tls.crt",
		MetricsCertKey:         "tls.key",
		WebhookPort:            9443,
		WebhookCertName:        "tls.crt",
		WebhookCertKey:         "tls.key",
		EnableHTTP2:            false,

		EventsServiceURL: "http://localhost:8090",
		CacheServiceURL:  "http://localhost:8094",

		DefaultCPU:                 "1",
		DefaultMemory:              "1Gi",
		ImagePullGracePeriod:       Duration{3 * time.Minute},
		CreateContainerGracePeriod: Duration{3 * time.Minute},
		QueuedStatusDelay:          Duration{DefaultQueuedStatusDelay},
		SaturatedStatusDelay:       Duration{DefaultSaturatedStatusDelay},
		ExecutingStatusDelay:       Duration{DefaultExecutingStatusDelay},

		MaxSystemFailures: 3,
		// Reconciles spend most of their time waiting on the API server and on the
		// events batcher's acknowledgement (one batch window plus one RPC), not on CPU.
		// 64 workers keep batches full and pods launching while a handful of cores
		// stay free; more only queue on the client's QPS limit.
		MaxConcurrentReconciles: 64,
		RequeueDuration:         Duration{10 * time.Second},
		KubeAPIQPS:              100,
		KubeAPIBurst:            200,

		GC: GCConfig{
			Interval: Duration{30 * time.Minute},
			MaxTTL:   Duration{time.Hour},
		},

		Webhook: DefaultWebhook(),

		PodSecurity: PodSecurityConfig{Level: "baseline"},

		// Flyte's defaults of its sections the executor reads, so that a file
		// gives the pod and the storage access Flyte's executor would.
		Storage:   DefaultStorageConfig(),
		TaskLogs:  DefaultTaskLogConfig(),
		K8sPlugin: DefaultK8sPluginConfig(),
		Otel:      DefaultOtelConfig(),
	}
}

// DefaultStorageConfig is Flyte's default `storage:` section (flytestdlib's
// storage config): stow with S3 in us-east-1, reads of at most 2 MB.
func DefaultStorageConfig() StorageConfig {
	return StorageConfig{
		Type:   StorageTypeStow,
		Stow:   StowConfig{Kind: StowKindS3, Config: map[string]string{"region": "us-east-1"}},
		Limits: StorageLimits{GetLimitMegabytes: DefaultStorageGetLimitMegabytes},
	}
}
