package kubeflow

import (
	"fmt"
	"time"

	"github.com/taskaction/executor/pkg/config"
)

// Section is the configuration section of the three plugins,
// `plugins: kf-operator:`, Flyte's name.
const Section = "kf-operator"

// Config is the `plugins: kf-operator:` section, Flyte's keys.
type Config struct {
	// Timeout: a job the training operator has not touched (no start time,
	// no condition) this long after its creation fails the attempt as a
	// system failure: the operator is not running, or does not watch the
	// namespace.
	Timeout config.Duration `json:"timeout"`
}

// DefaultConfig is Flyte's default section.
func DefaultConfig() Config {
	return Config{Timeout: config.Duration{Duration: time.Minute}}
}

// LoadConfig decodes the section from cfg over the defaults, as Flyte's
// loader does, and checks it.
func LoadConfig(cfg config.Config) (Config, error) {
	c := DefaultConfig()
	if err := cfg.PluginSection(Section, &c); err != nil {
		return Config{}, err
	}
	// Flyte takes zero or less too, and then fails every job the operator
	// has not started the instant it is looked at.
	if c.Timeout.Duration <= 0 {
		return Config{}, fmt.Errorf("config: plugins.%s.timeout must be positive, got %v", Section, c.Timeout.Duration)
	}
	return c, nil
}
