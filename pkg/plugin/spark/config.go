package spark

import (
	"fmt"
	"time"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/tasklog"
)

// Section is the plugin's configuration section, `plugins: spark:`, as in
// Flyte.
const Section = "spark"

// Config is the `plugins: spark:` section, Flyte's keys and defaults.
type Config struct {
	// DefaultSparkConfig is the Spark configuration every application starts
	// from; the job's own sparkConf is laid over it.
	DefaultSparkConfig map[string]string `json:"spark-config-default"`
	// SparkHistoryServerURL, when set, is linked as the "Spark History UI"
	// of an application that ended.
	SparkHistoryServerURL string `json:"spark-history-server-url"`
	// Features are named sets of Spark configuration a job turns on with
	// sparkConf "spark.flyte.<name>.enabled": "true".
	Features []Feature `json:"features"`
	// LogConfig holds the log links of the application's pods.
	LogConfig LogConfig `json:"logs"`
	// EnablePodTemplate passes the task's pod spec (or the job's driver and
	// executor pod specs) as the operator's pod templates; false keeps the
	// legacy per-field pod settings only.
	EnablePodTemplate bool `json:"enable-pod-template"`
	// PodTemplateDetectionTimeout bounds Flyte's one-time read of the CRD's
	// schema. Accepted for Flyte's files; the executor does not read the CRD
	// (the operator it requires supports pod templates), so it has no effect.
	PodTemplateDetectionTimeout config.Duration `json:"pod-template-detection-timeout"`
}

// LogConfig are the log links of a SparkApplication, each of Flyte's
// plugins.logs form.
type LogConfig struct {
	// Mixed are links to the driver pod, once the operator named it.
	Mixed config.TaskLogConfig `json:"mixed"`
	// User are links to the driver pod's user logs.
	User config.TaskLogConfig `json:"user"`
	// System are links rendered with the application's name as the pod name.
	System config.TaskLogConfig `json:"system"`
	// AllUser are links to every pod's user logs, rendered with the
	// application's name, shown while the attempt is still pending too.
	AllUser config.TaskLogConfig `json:"all-user"`
}

// Feature is a named set of Spark configuration.
type Feature struct {
	Name        string            `json:"name"`
	SparkConfig map[string]string `json:"spark-config"`
}

// defaultPodTemplateDetectionTimeout is Flyte's default.
const defaultPodTemplateDetectionTimeout = 30 * time.Second

// DefaultConfig is Flyte's default section: pod templates on, and a
// Kubernetes dashboard link to the driver.
func DefaultConfig() Config {
	return Config{
		EnablePodTemplate:           true,
		PodTemplateDetectionTimeout: config.Duration{Duration: defaultPodTemplateDetectionTimeout},
		LogConfig: LogConfig{
			Mixed: config.TaskLogConfig{
				IsKubernetesEnabled:   true,
				KubernetesTemplateURI: "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}",
			},
		},
	}
}

// LoadConfig reads `plugins: spark:` from cfg over Flyte's defaults.
func LoadConfig(cfg config.Config) (Config, error) {
	c := DefaultConfig()
	if err := cfg.PluginSection(Section, &c); err != nil {
		return Config{}, err
	}
	return c, nil
}

// renderers are the log-link renderers of the four log configurations.
type renderers struct {
	mixed, user, system, allUser *tasklog.Renderer
}

func newRenderers(c LogConfig) (renderers, error) {
	var r renderers
	for _, x := range []struct {
		name string
		cfg  config.TaskLogConfig
		out  **tasklog.Renderer
	}{{"mixed", c.Mixed, &r.mixed}, {"user", c.User, &r.user}, {"system", c.System, &r.system}, {"all-user", c.AllUser, &r.allUser}} {
		rl, err := tasklog.New(x.cfg)
		if err != nil {
			return renderers{}, fmt.Errorf("plugins.%s.logs.%s: %w", Section, x.name, err)
		}
		*x.out = rl
	}
	return r, nil
}
