package ray

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/tasklog"
)

// Section is the plugin's configuration section, plugins.ray, as in Flyte.
const Section = "ray"

// Config is the plugins.ray section: Flyte's keys, with Flyte's defaults
// (DefaultConfig).
type Config struct {
	// ShutdownAfterJobFinishes deletes the Ray cluster once the job ended,
	// TTLSecondsAfterFinished later; a task's own shutdown_after_job_finishes
	// replaces both.
	ShutdownAfterJobFinishes bool  `json:"shutdownAfterJobFinishes"`
	TTLSecondsAfterFinished  int32 `json:"ttlSecondsAfterFinished"`
	// ServiceType is the head service's type: ClusterIP, NodePort or LoadBalancer.
	ServiceType string `json:"serviceType"`
	// SubmissionMode is how KubeRay submits the job: K8sJobMode (a submitter
	// pod), HTTPMode or SidecarMode.
	SubmissionMode string `json:"submissionMode"`
	// IncludeDashboard and DashboardHost are the head's `ray start`
	// include-dashboard and dashboard-host unless the task sets them.
	IncludeDashboard bool   `json:"includeDashboard"`
	DashboardHost    string `json:"dashboardHost"`
	// DeprecatedNodeIPAddress is the node IP address of head and workers
	// when Defaults does not set theirs (Flyte's older key).
	DeprecatedNodeIPAddress string `json:"nodeIPAddress"`
	// RemoteClusterConfig runs Ray jobs in another cluster: not supported
	// (New refuses it enabled).
	RemoteClusterConfig RemoteClusterConfig `json:"remoteClusterConfig"`
	// Logs, when set, are the log links of the head pod (else plugins.logs).
	Logs *config.TaskLogConfig `json:"logs"`
	// LogsSidecar is a container added to the head pod, with the head's
	// /tmp/ray mounted read-only, to ship Ray's logs.
	LogsSidecar *corev1.Container `json:"logsSidecar"`
	// DashboardURLTemplate is the link to the Ray dashboard while the job
	// runs; it may use {{ .rayClusterName }} and {{ .rayJobID }}.
	DashboardURLTemplate *config.TaskLogTemplate `json:"dashboardURLTemplate"`
	Defaults             NodeDefaults            `json:"defaults"`
	// EnableUsageStats lets Ray report usage statistics (otherwise every node
	// starts with disable-usage-stats).
	EnableUsageStats bool `json:"enableUsageStats"`
	// ServiceAccount runs the head and workers when neither the task nor the
	// executor names one.
	ServiceAccount string `json:"serviceAccount"`
}

// RemoteClusterConfig is Flyte's remote cluster setting; only Enabled is read.
type RemoteClusterConfig struct {
	Enabled bool `json:"enabled"`
}

// NodeDefaults are the `ray start` settings of head and workers when the
// task gives none (Flyte's plugins.ray.defaults).
type NodeDefaults struct {
	HeadNode   NodeConfig `json:"headNode"`
	WorkerNode NodeConfig `json:"workerNode"`
}

// NodeConfig is one node kind's defaults.
type NodeConfig struct {
	// StartParameters are used when the task's group sets no ray_start_params.
	StartParameters map[string]string `json:"startParameters"`
	// IPAddress is the node-ip-address unless the parameters set it.
	IPAddress string `json:"ipAddress"`
}

// `ray start` parameters the plugin sets unless the task does.
const (
	paramIncludeDashboard  = "include-dashboard"
	paramNodeIPAddress     = "node-ip-address"
	paramDashboardHost     = "dashboard-host"
	paramDisableUsageStats = "disable-usage-stats"
)

// DefaultConfig is Flyte's default plugins.ray section.
func DefaultConfig() Config {
	return Config{
		ShutdownAfterJobFinishes: true,
		TTLSecondsAfterFinished:  3600,
		ServiceType:              string(corev1.ServiceTypeNodePort),
		SubmissionMode:           string(rayv1.K8sJobMode),
		IncludeDashboard:         true,
		DashboardHost:            "0.0.0.0",
		ServiceAccount:           "default",
		Defaults: NodeDefaults{
			HeadNode:   NodeConfig{StartParameters: map[string]string{paramDisableUsageStats: "true"}, IPAddress: "$MY_POD_IP"},
			WorkerNode: NodeConfig{StartParameters: map[string]string{paramDisableUsageStats: "true"}, IPAddress: "$MY_POD_IP"},
		},
	}
}

// LoadConfig reads plugins.ray over Flyte's defaults and checks it. As in
// Flyte, a node kind without an IP address takes the deprecated nodeIPAddress.
func LoadConfig(cfg config.Config) (Config, error) {
	c := DefaultConfig()
	if err := cfg.PluginSection(Section, &c); err != nil {
		return Config{}, err
	}
	if c.Defaults.HeadNode.IPAddress == "" {
		c.Defaults.HeadNode.IPAddress = c.DeprecatedNodeIPAddress
	}
	if c.Defaults.WorkerNode.IPAddress == "" {
		c.Defaults.WorkerNode.IPAddress = c.DeprecatedNodeIPAddress
	}
	return c, c.Validate()
}

// Validate checks what would otherwise fail every Ray task (Flyte fails each
// task on a bad submission mode; here the executor refuses to start).
func (c Config) Validate() error {
	switch rayv1.JobSubmissionMode(c.SubmissionMode) {
	case rayv1.K8sJobMode, rayv1.HTTPMode, rayv1.SidecarMode, "":
	default:
		return fmt.Errorf("plugins.ray.submissionMode %q: want K8sJobMode, HTTPMode or SidecarMode", c.SubmissionMode)
	}
	switch corev1.ServiceType(c.ServiceType) {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, "":
	default:
		return fmt.Errorf("plugins.ray.serviceType %q: want ClusterIP, NodePort or LoadBalancer", c.ServiceType)
	}
	if c.TTLSecondsAfterFinished < 0 {
		return fmt.Errorf("plugins.ray.ttlSecondsAfterFinished %d: must not be negative", c.TTLSecondsAfterFinished)
	}
	if c.RemoteClusterConfig.Enabled {
		return fmt.Errorf("plugins.ray.remoteClusterConfig.enabled: running Ray jobs in another cluster is not supported by this executor")
	}
	if c.Logs != nil {
		if err := c.Logs.Validate(); err != nil {
			return fmt.Errorf("plugins.ray.logs: %w", err)
		}
	}
	if t := c.DashboardURLTemplate; t != nil {
		if err := (config.TaskLogConfig{Templates: []config.TaskLogTemplate{*t}}).Validate(); err != nil {
			return fmt.Errorf("plugins.ray.dashboardURLTemplate: %w", err)
		}
	}
	if s := c.LogsSidecar; s != nil && s.Name == "" {
		return fmt.Errorf("plugins.ray.logsSidecar.name: a container needs a name")
	}
	return nil
}

// renderers are the link renderers the configuration asks for (nil: none of
// that kind).
func (c Config) renderers() (logs, dashboard *tasklog.Renderer, err error) {
	if c.Logs != nil {
		if logs, err = tasklog.New(*c.Logs); err != nil {
			return nil, nil, fmt.Errorf("plugins.ray.logs: %w", err)
		}
	}
	if t := c.DashboardURLTemplate; t != nil {
		d := *t
		d.LinkType = "dashboard" // always a dashboard, as in Flyte
		if dashboard, err = tasklog.New(config.TaskLogConfig{Templates: []config.TaskLogTemplate{d}}); err != nil {
			return nil, nil, fmt.Errorf("plugins.ray.dashboardURLTemplate: %w", err)
		}
	}
	return logs, dashboard, nil
}
