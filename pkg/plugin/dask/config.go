package dask

import (
	"fmt"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/tasklog"
)

// Section is the plugin's configuration section, `plugins: dask:`, Flyte's.
const Section = "dask"

// Config is the `plugins: dask:` section, with Flyte's keys.
type Config struct {
	// Logs are the links of a Dask task: rendered for the job runner pod
	// (with {{ .daskSchedulerName }} besides the usual variables); a link of
	// linkType dashboard also gives the scheduler its --dashboard-prefix.
	// Flyte's default: the Kubernetes dashboard link, as plugins.logs.
	Logs config.TaskLogConfig `json:"logs"`
}

// DefaultConfig is Flyte's default of the section.
func DefaultConfig() Config {
	return Config{Logs: config.DefaultTaskLogConfig()}
}

// LoadConfig reads the section from cfg over Flyte's defaults and checks it.
func LoadConfig(cfg config.Config) (Config, *tasklog.Renderer, error) {
	c := DefaultConfig()
	if err := cfg.PluginSection(Section, &c); err != nil {
		return Config{}, nil, err
	}
	logs, err := tasklog.New(c.Logs)
	if err != nil {
		return Config{}, nil, fmt.Errorf("plugins.%s.logs: %w", Section, err)
	}
	return c, logs, nil
}
